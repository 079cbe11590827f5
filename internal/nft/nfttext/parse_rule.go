package nfttext

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseRule parses the text of one rule: its statements, as knftables.Rule.Rule
// holds them or "add rule <family> <table> <chain>" is followed by, and an
// optional trailing comment.
func ParseRule(text string) (*Rule, error) {
	toks, err := AppendTokens(nil, text)
	if err != nil {
		return nil, err
	}
	return parseRuleTokens(toks)
}

func parseRuleTokens(toks []Token) (*Rule, error) {
	c := &cursor{toks: toks, what: "rule"}
	r := &Rule{}
	for !c.done() {
		if _, ok := c.accept("comment"); ok {
			s, err := c.word("comment string")
			if err != nil {
				return nil, err
			}
			if !c.done() {
				return nil, c.errorf("comment must end the rule")
			}
			r.Comment = s
			break
		}
		st, err := parseStatement(c)
		if err != nil {
			return nil, err
		}
		r.Stmts = append(r.Stmts, st)
	}
	if len(r.Stmts) == 0 {
		return nil, fmt.Errorf("empty rule")
	}
	return r, nil
}

// ParseVerdict parses a verdict ("drop", "goto chain"), the value of a verdict
// map's element. A tracer's maps may also say "reject" (Kind "reject").
func ParseVerdict(text string) (Verdict, error) {
	toks, err := AppendTokens(nil, text)
	if err != nil {
		return Verdict{}, err
	}
	return parseVerdictWords(toks)
}

func parseVerdictWords(toks []Token) (Verdict, error) {
	c := &cursor{toks: toks, what: "verdict"}
	v, ok, err := parseVerdict(c)
	if _, rej := c.accept("reject"); rej {
		_, err = parseReject(c)
		v, ok = Verdict{Kind: "reject"}, true
	}
	if err != nil || !ok || !c.done() {
		words := make([]string, len(toks))
		for i, t := range toks {
			words[i] = t.Text
		}
		return Verdict{}, fmt.Errorf("bad verdict %q", strings.Join(words, " "))
	}
	return v, nil
}

// parseVerdict reads a verdict if one is next.
func parseVerdict(c *cursor) (Verdict, bool, error) {
	w, ok := c.accept("accept", "drop", "continue", "return", "jump", "goto")
	if !ok {
		return Verdict{}, false, nil
	}
	v := Verdict{Kind: w}
	if w == "jump" || w == "goto" {
		chain, err := c.name("chain name")
		if err != nil {
			return v, false, err
		}
		v.Chain = chain
	}
	return v, true, nil
}

func parseStatement(c *cursor) (Stmt, error) {
	if v, ok, err := parseVerdict(c); ok || err != nil {
		return v, err
	}
	switch w := c.peek(); w {
	case "reject":
		c.pos++
		return parseReject(c)
	case "counter":
		c.pos++
		return parseCounter(c)
	case "log":
		c.pos++
		return parseLog(c)
	case "masquerade":
		c.pos++
		return Masquerade{Flags: parseNATFlags(c)}, nil
	case "dnat", "snat":
		return parseNAT(c)
	case "update", "add":
		return parseDynset(c)
	}
	if startsExpr(c.peek()) {
		return parseExprStatement(c)
	}
	return nil, c.errorf("unsupported statement")
}

func parseReject(c *cursor) (Stmt, error) {
	var r Reject
	if _, ok := c.accept("with"); !ok {
		return r, nil
	}
	proto, err := c.expect("icmp", "icmpv6", "icmpx", "tcp")
	if err != nil {
		return nil, err
	}
	r.With = append(r.With, proto)
	if proto == "tcp" {
		if _, err := c.expect("reset"); err != nil {
			return nil, err
		}
		return Reject{With: append(r.With, "reset")}, nil
	}
	if w, ok := c.accept("type", "code"); ok {
		r.With = append(r.With, w)
	}
	t, err := c.word("reject type")
	if err != nil {
		return nil, err
	}
	return Reject{With: append(r.With, t)}, nil
}

func parseCounter(c *cursor) (Stmt, error) {
	var ct Counter
	if _, ok := c.accept("name"); ok {
		name, err := c.name("counter name")
		if err != nil {
			return nil, err
		}
		ct.Name = name
	} else if _, ok := c.accept("packets"); ok {
		var err error
		if ct.Packets, err = parseUint(c, "packet count", 64); err != nil {
			return nil, err
		}
		if _, err := c.expect("bytes"); err != nil {
			return nil, err
		}
		if ct.Bytes, err = parseUint(c, "byte count", 64); err != nil {
			return nil, err
		}
		ct.Values = true
	}
	return ct, nil
}

func parseUint(c *cursor, what string, bits int) (uint64, error) {
	w, err := c.word(what)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(w, 0, bits)
	if err != nil {
		return 0, fmt.Errorf("bad %s %q: %w", what, w, err)
	}
	return n, nil
}

func parseLog(c *cursor) (Stmt, error) {
	var l Log
	for {
		opt, ok := c.accept("prefix", "level", "flags", "group", "snaplen", "queue-threshold")
		if !ok {
			return l, nil
		}
		v, err := c.word("log " + opt)
		if err != nil {
			return nil, err
		}
		l.Options = append(l.Options, opt, v)
		for opt == "flags" {
			if _, ok := c.accept(","); !ok {
				break
			}
			f, err := c.word("log flag")
			if err != nil {
				return nil, err
			}
			l.Options[len(l.Options)-1] += "," + f
		}
	}
}

var natFlags = []string{"persistent", "random", "fully-random"}

// parseNATFlags reads the flags of masquerade, dnat and snat: "random",
// "fully-random,persistent".
func parseNATFlags(c *cursor) []string {
	var flags []string
	for {
		f, ok := c.accept(natFlags...)
		if !ok {
			return flags
		}
		flags = append(flags, f)
		if c.peek() == "," && (c.peekAt(1) == "persistent" || c.peekAt(1) == "random" || c.peekAt(1) == "fully-random") {
			c.pos++
		}
	}
}

func parseNAT(c *cursor) (Stmt, error) {
	n := NAT{Kind: c.toks[c.pos].Text}
	c.pos++
	if f, ok := c.accept("ip", "ip6"); ok {
		n.Family = f
	}
	if _, ok := c.accept("addr"); ok {
		if _, err := c.expect("."); err != nil {
			return nil, err
		}
		if _, err := c.expect("port"); err != nil {
			return nil, err
		}
		n.AddrPort = true
	}
	if _, err := c.expect("to"); err != nil {
		return nil, err
	}
	if startsExpr(c.peek()) {
		key, err := parseExpr(c)
		if err != nil {
			return nil, err
		}
		if _, err := c.expect("map"); err != nil {
			return nil, err
		}
		m, err := parseMapRef(c, key, false)
		if err != nil {
			return nil, err
		}
		n.Map = &m
	} else {
		to, err := c.word("nat target")
		if err != nil {
			return nil, err
		}
		n.To = []string{to}
		for {
			if _, ok := c.accept("."); !ok {
				break
			}
			port, err := c.word("nat target port")
			if err != nil {
				return nil, err
			}
			n.To = append(n.To, port)
		}
	}
	n.Flags = parseNATFlags(c)
	if c.peek() == "to" {
		return nil, c.errorf("unsupported nat option")
	}
	return n, nil
}

func parseDynset(c *cursor) (Stmt, error) {
	d := Dynset{Op: c.toks[c.pos].Text}
	c.pos++
	name, err := c.word("@set")
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(name, "@") || len(name) < 2 {
		return nil, fmt.Errorf("expected @set, got %q", name)
	}
	d.Set = name[1:]
	if _, err := c.expect("{"); err != nil {
		return nil, err
	}
	if d.Key, err = parseExpr(c); err != nil {
		return nil, err
	}
	if _, ok := c.accept("timeout"); ok {
		if d.Timeout, err = c.word("timeout"); err != nil {
			return nil, err
		}
	}
	if _, err := c.expect("}"); err != nil {
		return nil, err
	}
	return d, nil
}

// parseExprStatement parses the statements that start with a selector: a match,
// a verdict map and "mark set".
func parseExprStatement(c *cursor) (Stmt, error) {
	left, err := parseExpr(c)
	if err != nil {
		return nil, err
	}
	if _, ok := c.accept("set"); ok {
		return parseMarkSet(c, left)
	}
	if _, ok := c.accept("vmap"); ok {
		m, err := parseMapRef(c, left, true)
		if err != nil {
			return nil, err
		}
		return VMap{m}, nil
	}
	m := Match{Left: left}
	if _, ok := c.accept("!=", "ne"); ok {
		m.Neq = true
	} else {
		c.accept("==", "eq")
	}
	switch w := c.peek(); {
	case strings.HasPrefix(w, "@") && len(w) > 1:
		c.pos++
		m.Set = w[1:]
	case w == "{":
		c.pos++
		m.Braced = true
		for {
			key, err := parseElementKey(c, left)
			if err != nil {
				return nil, err
			}
			m.Elems = append(m.Elems, key)
			if _, ok := c.accept(","); ok && c.peek() != "}" {
				continue
			}
			if _, err := c.expect("}"); err != nil {
				return nil, err
			}
			break
		}
	default:
		// A literal, or a comma list of literals ("ct state established,related").
		for {
			key, err := parseElementKey(c, left)
			if err != nil {
				return nil, err
			}
			m.Elems = append(m.Elems, key)
			if _, ok := c.accept(","); !ok {
				break
			}
		}
	}
	return m, nil
}

func parseMarkSet(c *cursor, left Expr) (Stmt, error) {
	if len(left) != 1 || left[0].Name != "meta mark" || len(left[0].Ops) != 0 {
		return nil, c.errorf("only \"meta mark set\" is supported")
	}
	if startsExpr(c.peek()) {
		v, err := parseExpr(c)
		if err != nil {
			return nil, err
		}
		if len(v) != 1 || v[0].Name != "meta mark" {
			return nil, c.errorf("mark can only be set from an expression over the mark")
		}
		return MarkSet{From: &v[0]}, nil
	}
	n, err := parseUint(c, "mark", 32)
	if err != nil {
		return nil, err
	}
	return MarkSet{Value: uint32(n)}, nil
}

// parseElementKey parses "v1 . v2 . v3", one word per selector of key.
func parseElementKey(c *cursor, key Expr) ([]string, error) {
	words := make([]string, len(key))
	for i, s := range key {
		if i > 0 {
			if _, err := c.expect("."); err != nil {
				return nil, err
			}
		}
		w, err := c.word(s.Type + " value")
		if err != nil {
			return nil, err
		}
		words[i] = w
	}
	return words, nil
}

// parseMapRef parses "@name" or "{ key : value, … }" after "vmap" or "map".
func parseMapRef(c *cursor, key Expr, verdict bool) (MapRef, error) {
	m := MapRef{Key: key}
	if w := c.peek(); strings.HasPrefix(w, "@") && len(w) > 1 {
		c.pos++
		m.Name = w[1:]
		return m, nil
	}
	if _, err := c.expect("{"); err != nil {
		return m, err
	}
	for {
		start := c.pos
		k, err := parseElementKey(c, key)
		if err != nil {
			return m, err
		}
		if _, err := c.expect(":"); err != nil {
			return m, err
		}
		vstart := c.pos
		for !c.done() && c.peek() != "," && c.peek() != "}" {
			c.pos++
		}
		e := MapElem{Key: k}
		if verdict {
			v, err := parseVerdictWords(c.toks[vstart:c.pos])
			if err != nil {
				return m, err
			}
			e.Verdict = &v
		} else if e.Data, err = dataWords(c.toks[vstart:c.pos]); err != nil {
			return m, err
		}
		e.Text = joinTokens(c.toks[start:c.pos])
		m.Elems = append(m.Elems, e)
		if _, ok := c.accept(","); ok && c.peek() != "}" {
			continue
		}
		if _, err := c.expect("}"); err != nil {
			return m, err
		}
		return m, nil
	}
}

// dataWords reads the words of a data map's value, "a . b".
func dataWords(toks []Token) ([]string, error) {
	var words []string
	for i, t := range toks {
		if (i%2 == 1) != (!t.Quoted && t.Text == ".") {
			return nil, fmt.Errorf("bad map value %q", joinTokens(toks))
		}
		if i%2 == 0 {
			words = append(words, t.Text)
		}
	}
	if len(words) == 0 || len(toks)%2 == 0 {
		return nil, fmt.Errorf("bad map value %q", joinTokens(toks))
	}
	return words, nil
}

// ParseData parses the value of a data map's element, "10.0.0.1 . 80", into its
// words.
func ParseData(text string) ([]string, error) {
	toks, err := AppendTokens(nil, text)
	if err != nil {
		return nil, err
	}
	return dataWords(toks)
}

func joinTokens(ts []Token) string {
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t.Text)
	}
	return b.String()
}
