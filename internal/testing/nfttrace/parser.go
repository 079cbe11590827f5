package nfttrace

import (
	"fmt"
	"strconv"
	"strings"
)

// parseRule tokenizes and parses one rule's text.
func parseRule(text string) (*parsedRule, error) {
	toks, err := tokenize(text)
	if err != nil {
		return nil, err
	}
	s := &tokenStream{toks: toks}
	r := &parsedRule{text: text}
	for !s.eof() {
		st, err := parseStatement(s)
		if err != nil {
			return nil, err
		}
		r.stmts = append(r.stmts, st)
	}
	return r, nil
}

func parseStatement(s *tokenStream) (stmt, error) {
	t := s.peek()
	switch t {
	case "accept", "drop", "continue", "return":
		s.next()
		return verdictStmt{verdict: string(t)}, nil
	case "jump", "goto":
		s.next()
		chain, err := s.word("chain name")
		if err != nil {
			return nil, err
		}
		return verdictStmt{verdict: string(t), chain: unquote(chain)}, nil
	case "reject":
		s.next()
		if err := parseRejectOptions(s); err != nil {
			return nil, err
		}
		return verdictStmt{verdict: "reject"}, nil
	case "counter":
		s.next()
		return parseCounter(s)
	case "log":
		s.next()
		return parseLog(s)
	case "comment":
		s.next()
		if _, err := s.word("comment string"); err != nil {
			return nil, err
		}
		return noopStmt{what: "comment"}, nil
	case "masquerade":
		s.next()
		if err := parseNATFlags(s); err != nil {
			return nil, err
		}
		return masqueradeStmt{}, nil
	case "dnat", "snat":
		return parseNAT(s)
	case "update", "add":
		return parseUpdate(s)
	}
	if startsExpr(t) {
		return parseExprStatement(s)
	}
	return nil, s.errorf("unsupported statement")
}

func parseRejectOptions(s *tokenStream) error {
	if _, ok := s.accept("with"); !ok {
		return nil
	}
	proto, err := s.expect("icmp", "icmpv6", "icmpx", "tcp")
	if err != nil {
		return err
	}
	if proto == "tcp" {
		_, err = s.expect("reset")
		return err
	}
	s.accept("type", "code")
	_, err = s.word("reject type")
	return err
}

func parseCounter(s *tokenStream) (stmt, error) {
	if _, ok := s.accept("name"); ok {
		if _, err := s.word("counter name"); err != nil {
			return nil, err
		}
	} else if _, ok := s.accept("packets"); ok {
		if _, err := s.word("packet count"); err != nil {
			return nil, err
		}
		if _, err := s.expect("bytes"); err != nil {
			return nil, err
		}
		if _, err := s.word("byte count"); err != nil {
			return nil, err
		}
	}
	return noopStmt{what: "counter"}, nil
}

func parseLog(s *tokenStream) (stmt, error) {
	for {
		opt, ok := s.accept("prefix", "level", "flags", "group", "snaplen", "queue-threshold")
		if !ok {
			return noopStmt{what: "log"}, nil
		}
		if _, err := s.word("log " + string(opt)); err != nil {
			return nil, err
		}
		for opt == "flags" {
			if _, ok := s.accept(","); !ok {
				break
			}
			if _, err := s.word("log flag"); err != nil {
				return nil, err
			}
		}
	}
}

func parseNATFlags(s *tokenStream) error {
	for {
		if _, ok := s.accept("persistent", "random", "fully-random"); !ok {
			if s.peek() == "to" {
				return s.errorf("unsupported nat option")
			}
			return nil
		}
		if s.peek() == "," && (s.peekAt(1) == "persistent" || s.peekAt(1) == "random" || s.peekAt(1) == "fully-random") {
			s.next()
		}
	}
}

func parseNAT(s *tokenStream) (stmt, error) {
	n := natStmt{kind: string(s.next())}
	if f, ok := s.accept("ip", "ip6"); ok {
		n.family = string(f)
	}
	if _, ok := s.accept("addr"); ok {
		if _, err := s.expect("."); err != nil {
			return nil, err
		}
		if _, err := s.expect("port"); err != nil {
			return nil, err
		}
	}
	if _, err := s.expect("to"); err != nil {
		return nil, err
	}
	if startsExpr(s.peek()) {
		key, err := parseExpr(s)
		if err != nil {
			return nil, err
		}
		if _, err := s.expect("map"); err != nil {
			return nil, err
		}
		lookup, err := parseMapRef(s, key, false)
		if err != nil {
			return nil, err
		}
		n.lookup = &lookup
	} else {
		first, err := s.word("nat target")
		if err != nil {
			return nil, err
		}
		n.literal = []string{string(first)}
		for {
			if _, ok := s.accept("."); !ok {
				break
			}
			tok, err := s.word("nat target port")
			if err != nil {
				return nil, err
			}
			n.literal = append(n.literal, string(tok))
		}
		if _, err := parseNATTarget(n.literal, n.family); err != nil {
			return nil, err
		}
	}
	if err := parseNATFlags(s); err != nil {
		return nil, err
	}
	return n, nil
}

func parseUpdate(s *tokenStream) (stmt, error) {
	s.next()
	name, err := s.word("@set")
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(string(name), "@") {
		return nil, fmt.Errorf("expected @set, got %q", name)
	}
	if _, err := s.expect("{"); err != nil {
		return nil, err
	}
	key, err := parseExpr(s)
	if err != nil {
		return nil, err
	}
	if _, ok := s.accept("timeout"); ok {
		if _, err := s.word("timeout"); err != nil {
			return nil, err
		}
	}
	if _, err := s.expect("}"); err != nil {
		return nil, err
	}
	return updateStmt{set: string(name[1:]), key: key}, nil
}

func parseExprStatement(s *tokenStream) (stmt, error) {
	lhs, err := parseExpr(s)
	if err != nil {
		return nil, err
	}
	if _, ok := s.accept("set"); ok {
		return parseMarkSet(s, lhs)
	}
	if _, ok := s.accept("vmap"); ok {
		lookup, err := parseMapRef(s, lhs, true)
		if err != nil {
			return nil, err
		}
		return vmapStmt{lookup: lookup}, nil
	}
	m := matchStmt{lhs: lhs}
	if _, ok := s.accept("!=", "ne"); ok {
		m.negate = true
	} else {
		s.accept("==", "eq")
	}
	switch t := s.peek(); {
	case strings.HasPrefix(string(t), "@"):
		s.next()
		m.setName = string(t[1:])
	case t == "{":
		s.next()
		for {
			key, err := parseElementKey(s, lhs.kinds())
			if err != nil {
				return nil, err
			}
			m.anon = append(m.anon, key)
			if _, ok := s.accept(","); ok && s.peek() != "}" {
				continue
			}
			if _, err := s.expect("}"); err != nil {
				return nil, err
			}
			break
		}
	default:
		// A literal, or a comma list of literals (e.g. "ct state established,related").
		for {
			key, err := parseElementKey(s, lhs.kinds())
			if err != nil {
				return nil, err
			}
			m.anon = append(m.anon, key)
			if _, ok := s.accept(","); !ok {
				break
			}
		}
	}
	return m, nil
}

func parseMarkSet(s *tokenStream, lhs expr) (stmt, error) {
	if len(lhs.parts) != 1 || lhs.parts[0].kind != kindMark || len(lhs.parts[0].bitops) != 0 {
		return nil, s.errorf("only \"meta mark set\" is supported")
	}
	if startsExpr(s.peek()) {
		v, err := parseExpr(s)
		if err != nil {
			return nil, err
		}
		if len(v.parts) != 1 || v.parts[0].kind != kindMark {
			return nil, s.errorf("mark can only be set from an expression over the mark")
		}
		return markSetStmt{value: &v}, nil
	}
	t, err := s.word("mark value")
	if err != nil {
		return nil, err
	}
	n, err := parseNumber(kindMark, string(t))
	if err != nil {
		return nil, err
	}
	return markSetStmt{literal: n}, nil
}

// parseElementKey parses "v1 . v2 . v3" with one literal per kind.
func parseElementKey(s *tokenStream, kinds []kind) ([]pattern, error) {
	key := make([]pattern, len(kinds))
	for i, k := range kinds {
		if i > 0 {
			if _, err := s.expect("."); err != nil {
				return nil, err
			}
		}
		t, err := s.word(k.String() + " value")
		if err != nil {
			return nil, err
		}
		if key[i], err = parseLiteral(k, t); err != nil {
			return nil, err
		}
	}
	return key, nil
}

// parseMapRef parses "@name" or "{ key : value, ... }" after "vmap"/"map".
func parseMapRef(s *tokenStream, key expr, verdict bool) (mapLookup, error) {
	m := mapLookup{key: key, verdict: verdict}
	if t := s.peek(); strings.HasPrefix(string(t), "@") {
		s.next()
		m.name = string(t[1:])
		return m, nil
	}
	if _, err := s.expect("{"); err != nil {
		return m, err
	}
	for {
		start := s.pos
		k, err := parseElementKey(s, key.kinds())
		if err != nil {
			return m, err
		}
		if _, err := s.expect(":"); err != nil {
			return m, err
		}
		var valueToks []string
		for !s.eof() && s.peek() != "," && s.peek() != "}" {
			valueToks = append(valueToks, string(s.next()))
		}
		e, err := makeMapEntry(k, valueToks, verdict)
		if err != nil {
			return m, err
		}
		e.text = plainTokens(s.toks[start:s.pos])
		m.anon = append(m.anon, e)
		if _, ok := s.accept(","); ok && s.peek() != "}" {
			continue
		}
		if _, err := s.expect("}"); err != nil {
			return m, err
		}
		return m, nil
	}
}

// makeMapEntry builds a map entry from its value tokens: a verdict for a vmap, or
// data components ("10.0.0.1 . 80") for a data map.
func makeMapEntry(key []pattern, valueToks []string, verdict bool) (mapEntry, error) {
	e := mapEntry{key: key}
	if verdict {
		toks := make([]token, len(valueToks))
		for i, v := range valueToks {
			toks[i] = token(v)
		}
		vs := &tokenStream{toks: toks}
		st, err := parseStatement(vs)
		if err != nil {
			return e, fmt.Errorf("bad verdict %q: %w", strings.Join(valueToks, " "), err)
		}
		v, ok := st.(verdictStmt)
		if !ok || !vs.eof() {
			return e, fmt.Errorf("bad verdict %q", strings.Join(valueToks, " "))
		}
		e.verdict = &v
		return e, nil
	}
	for i, v := range valueToks {
		if (i%2 == 1) != (v == ".") {
			return e, fmt.Errorf("bad map value %q", strings.Join(valueToks, " "))
		}
		if v != "." {
			e.data = append(e.data, v)
		}
	}
	if len(e.data) == 0 {
		return e, fmt.Errorf("empty map value")
	}
	return e, nil
}

var exprStarts = map[token]bool{
	"ip": true, "ip6": true, "meta": true, "mark": true, "iifname": true, "oifname": true,
	"iif": true, "oif": true, "tcp": true, "udp": true, "sctp": true, "th": true,
	"fib": true, "ct": true, "numgen": true,
}

func startsExpr(t token) bool { return exprStarts[t] }

// parseExpr parses a selector or a concatenation of selectors, each optionally
// followed by bitwise operations with constants.
func parseExpr(s *tokenStream) (expr, error) {
	var e expr
	for {
		c, err := parsePrimary(s)
		if err != nil {
			return e, err
		}
		for {
			op, ok := s.accept("&", "and", "|", "or", "^", "xor")
			if !ok {
				break
			}
			if c.kind != kindMark && c.kind != kindInteger {
				return e, s.errorf("bitwise operation on %s is not supported", c.sel)
			}
			t, err := s.word("bitmask")
			if err != nil {
				return e, err
			}
			n, err := parseNumber(kindMark, string(t))
			if err != nil {
				return e, err
			}
			c.bitops = append(c.bitops, bitop{op: map[token]byte{"&": '&', "and": '&', "|": '|', "or": '|', "^": '^', "xor": '^'}[op], val: n})
		}
		e.parts = append(e.parts, c)
		if s.peek() == "." && startsExpr(s.peekAt(1)) {
			s.next()
			continue
		}
		return e, nil
	}
}

func parsePrimary(s *tokenStream) (component, error) {
	t := s.next()
	switch t {
	case "ip", "ip6":
		fields := map[token]kind{"saddr": kindAddr4, "daddr": kindAddr4, "protocol": kindProto}
		if t == "ip6" {
			fields = map[token]kind{"saddr": kindAddr6, "daddr": kindAddr6, "nexthdr": kindProto}
		}
		f := s.next()
		k, ok := fields[f]
		if !ok {
			s.pos--
			return component{}, s.errorf("unsupported %s field", t)
		}
		return component{sel: string(t) + " " + string(f), kind: k}, nil
	case "meta":
		return parseMetaKey(s, s.next())
	case "mark", "iifname", "oifname", "iif", "oif":
		return parseMetaKey(s, t)
	case "tcp", "udp", "sctp", "th":
		f, err := s.expect("dport", "sport")
		if err != nil {
			return component{}, err
		}
		return component{sel: string(t) + " " + string(f), kind: kindPort}, nil
	case "fib":
		a, err := s.expect("saddr", "daddr")
		if err != nil {
			return component{}, err
		}
		// "fib daddr . iif type local": our model has no per-interface addresses.
		if s.peek() == "." && (s.peekAt(1) == "iif" || s.peekAt(1) == "oif") {
			s.next()
			s.next()
		}
		if _, err := s.expect("type"); err != nil {
			return component{}, err
		}
		return component{sel: "fib " + string(a) + " type", kind: kindFibType}, nil
	case "ct":
		f, err := s.expect("state", "status")
		if err != nil {
			return component{}, err
		}
		k := kindCTState
		if f == "status" {
			k = kindCTStatus
		}
		return component{sel: "ct " + string(f), kind: k}, nil
	case "numgen":
		if _, err := s.expect("random"); err != nil {
			return component{}, s.errorf("only \"numgen random\" is supported")
		}
		if _, err := s.expect("mod"); err != nil {
			return component{}, err
		}
		c := component{sel: "numgen", kind: kindInteger}
		mod, err := s.word("numgen modulus")
		if err != nil {
			return c, err
		}
		if c.mod, err = strconv.ParseUint(string(mod), 0, 32); err != nil || c.mod == 0 {
			return c, fmt.Errorf("bad numgen modulus %q", mod)
		}
		if _, ok := s.accept("offset"); ok {
			off, err := s.word("numgen offset")
			if err != nil {
				return c, err
			}
			if c.offset, err = strconv.ParseUint(string(off), 0, 32); err != nil {
				return c, fmt.Errorf("bad numgen offset %q", off)
			}
		}
		return c, nil
	}
	s.pos--
	return component{}, s.errorf("unsupported expression")
}

func parseMetaKey(s *tokenStream, key token) (component, error) {
	kinds := map[token]kind{
		"l4proto": kindProto, "mark": kindMark, "iifname": kindIfname, "oifname": kindIfname,
		"iif": kindIfname, "oif": kindIfname, "nfproto": kindNfproto,
	}
	k, ok := kinds[key]
	if !ok {
		s.pos--
		return component{}, s.errorf("unsupported meta key")
	}
	return component{sel: "meta " + string(key), kind: k}, nil
}

func plainTokens(ts []token) string {
	ss := make([]string, len(ts))
	for i, t := range ts {
		ss[i] = string(t)
	}
	return strings.Join(ss, " ")
}
