package nftnetlink

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// anonSet is an anonymous set or map a rule needs ("{ … }" or "vmap { … }"); the
// translator creates it in the batch just before the rule and binds it by id.
type anonSet struct {
	id       uint32
	key      keyType
	data     *keyType // nil for sets
	interval bool
	elems    []anonElem
}

type anonElem struct {
	key     []byte
	flags   uint32 // NFT_SET_ELEM_INTERVAL_END
	open    bool   // interval without end element (NFTNL_SET_ELEM_F_INTERVAL_OPEN)
	verdict *expr.Verdict
	data    []byte
}

// compiledRule is the netlink form of one rule text.
type compiledRule struct {
	exprs   []expr.Any
	comment string
	anon    []*anonSet
}

// ruleCompiler compiles the rule vocabulary of doc.go into the expressions nft 1.0.6
// generates for it.
type ruleCompiler struct {
	family string // "ip" or "ip6"
	c      cursor
	out    compiledRule
	nextID func() uint32
}

func compileRule(family string, toks []token, nextID func() uint32) (compiledRule, error) {
	rc := &ruleCompiler{family: family, c: cursor{toks: toks}, nextID: nextID}
	for !rc.c.done() {
		if err := rc.statement(); err != nil {
			return compiledRule{}, err
		}
	}
	if len(rc.out.exprs) == 0 {
		return compiledRule{}, fmt.Errorf("empty rule")
	}
	return rc.out, nil
}

func (rc *ruleCompiler) emit(e ...expr.Any) { rc.out.exprs = append(rc.out.exprs, e...) }

// reg converts an offset in 32-bit words into nft's register number: 128-bit
// registers (1-4) when aligned, 32-bit registers (8-23) otherwise.
func reg(word int) uint32 {
	if word%4 == 0 {
		return uint32(1 + word/4)
	}
	return uint32(unix.NFT_REG32_00 + word)
}

var verdicts = map[string]expr.VerdictKind{
	"accept": expr.VerdictAccept, "drop": expr.VerdictDrop, "return": expr.VerdictReturn,
	"continue": expr.VerdictContinue, "jump": expr.VerdictJump, "goto": expr.VerdictGoto,
}

// parseVerdict reads "drop", "jump chain", ….
func parseVerdict(c *cursor) (*expr.Verdict, error) {
	w, err := c.word("verdict")
	if err != nil {
		return nil, err
	}
	kind, ok := verdicts[w]
	if !ok {
		return nil, fmt.Errorf("unsupported verdict %q", w)
	}
	v := &expr.Verdict{Kind: kind}
	if kind == expr.VerdictJump || kind == expr.VerdictGoto {
		if v.Chain, err = c.quotedOrWord("chain name"); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (rc *ruleCompiler) statement() error {
	c := &rc.c
	if !c.done() && c.toks[c.pos].quoted {
		return fmt.Errorf("unexpected string %q", c.toks[c.pos].text)
	}
	w := c.peek()
	switch w {
	case "comment":
		c.next()
		s, err := c.quotedOrWord("comment")
		if err != nil {
			return err
		}
		if !c.done() {
			return fmt.Errorf("comment must end the rule")
		}
		rc.out.comment = s
		return nil
	case "counter":
		c.next()
		if c.accept("name") {
			name, err := c.quotedOrWord("counter name")
			if err != nil {
				return err
			}
			rc.counter(name)
			return nil
		}
		rc.counter("")
		return nil
	case "accept", "drop", "return", "continue", "jump", "goto":
		v, err := parseVerdict(c)
		if err != nil {
			return err
		}
		rc.emit(v)
		return nil
	case "reject":
		c.next()
		rc.reject()
		return nil
	case "masquerade":
		c.next()
		m := &expr.Masq{}
		m.Random, m.FullyRandom, m.Persistent = natFlags(c)
		rc.emit(m)
		return nil
	case "dnat", "snat":
		return rc.natStmt()
	case "update", "add":
		return rc.dynsetStmt()
	case "mark", "meta":
		if c.peekAt(1) == "set" || (w == "meta" && c.peekAt(1) == "mark" && c.peekAt(2) == "set") {
			return rc.markSetStmt()
		}
	}
	return rc.match()
}

// selector is a value loaded into a register.
type selector struct {
	load  func(r uint32) expr.Any
	typ   dataType
	len   int    // bytes loaded
	kind  string // "ct-bitmask" for ct state/status, "fib" for fib type
	names map[string]uint32
	// dep is the protocol a "tcp|udp|sctp dport" selector depends on: nft matches
	// "meta l4proto" first.
	dep byte
}

var ctStates = map[string]uint32{"invalid": 1, "established": 2, "related": 4, "new": 8, "untracked": 64}
var ctStatuses = map[string]uint32{"expected": 1, "seen-reply": 2, "assured": 4, "confirmed": 8, "snat": 16, "dnat": 32, "dying": 512}
var fibTypes = map[string]uint32{"unspec": 0, "unicast": 1, "local": 2, "broadcast": 3, "anycast": 4, "multicast": 5, "blackhole": 6, "unreachable": 7, "prohibit": 8}

func payload(base expr.PayloadBase, off, n int) func(uint32) expr.Any {
	return func(r uint32) expr.Any {
		return &expr.Payload{OperationType: expr.PayloadLoad, DestRegister: r, Base: base, Offset: uint32(off), Len: uint32(n)}
	}
}

func meta(k expr.MetaKey) func(uint32) expr.Any {
	return func(r uint32) expr.Any { return &expr.Meta{Key: k, Register: r} }
}

// selector parses one selector ("ip daddr", "meta l4proto", "numgen random mod 3").
func (rc *ruleCompiler) selector() (*selector, error) {
	c := &rc.c
	w := c.next()
	switch w {
	case "ip", "ip6":
		if w != rc.family {
			return nil, fmt.Errorf("%q selector in a %s table", w, rc.family)
		}
		switch field := c.next(); field {
		case "saddr", "daddr":
			return addrSelector(w == "ip6", field == "daddr"), nil
		default:
			return nil, fmt.Errorf("unsupported selector %s %s", w, field)
		}
	case "th", "tcp", "udp", "sctp":
		switch f := c.next(); f {
		case "sport", "dport":
			return portSelector(f == "dport", protocols[w]), nil // protocols["th"] is 0
		default:
			return nil, fmt.Errorf("unsupported selector %s %s", w, f)
		}
	case "meta":
		switch f := c.next(); f {
		case "l4proto":
			return l4protoSelector(), nil
		case "mark":
			return markSelector(), nil
		case "iifname", "oifname":
			c.pos--
			return rc.selector()
		default:
			return nil, fmt.Errorf("unsupported selector meta %s", f)
		}
	case "mark":
		return markSelector(), nil
	case "iifname":
		return ifnameSelector(expr.MetaKeyIIFNAME), nil
	case "oifname":
		return ifnameSelector(expr.MetaKeyOIFNAME), nil
	case "ct":
		switch f := c.next(); f {
		case "state", "status":
			return ctSelector(f == "status"), nil
		default:
			return nil, fmt.Errorf("unsupported selector ct %s", f)
		}
	case "fib":
		a := c.next()
		if a != "saddr" && a != "daddr" {
			return nil, fmt.Errorf("unsupported fib input %q", a)
		}
		if err := c.expect("type"); err != nil {
			return nil, err
		}
		return fibSelector(a == "daddr"), nil
	case "numgen":
		if err := c.expect("random"); err != nil {
			return nil, err
		}
		if err := c.expect("mod"); err != nil {
			return nil, err
		}
		mod, err := strconv.ParseUint(c.next(), 10, 32)
		if err != nil || mod == 0 {
			return nil, fmt.Errorf("bad numgen modulus")
		}
		var offset uint64
		if c.accept("offset") {
			if offset, err = strconv.ParseUint(c.next(), 10, 32); err != nil {
				return nil, fmt.Errorf("bad numgen offset")
			}
		}
		return numgenSelector(uint32(mod), uint32(offset)), nil
	}
	return nil, fmt.Errorf("unsupported statement %q", w)
}

// match compiles "selector [. selector]* relation".
func (rc *ruleCompiler) match() error {
	c := &rc.c
	var sels []*selector
	for {
		s, err := rc.selector()
		if err != nil {
			return err
		}
		if s.dep != 0 {
			return fmt.Errorf("protocol selectors are only supported in nat map keys")
		}
		sels = append(sels, s)
		if !c.accept(".") {
			break
		}
	}
	if len(sels) > 1 {
		for _, s := range sels {
			if s.kind != "" {
				return fmt.Errorf("%s cannot be concatenated", s.typ.name)
			}
		}
		return rc.lookupRelation(rc.loadKey(sels))
	}
	s := sels[0]
	if s.kind == "" || s.kind == "fib" {
		rc.emit(s.load(1))
	}
	switch s.kind {
	case "ct-bitmask":
		return rc.bitmaskMatch(s)
	case "fib":
		return rc.namedMatch(s)
	}
	if s.typ.name == "mark" && c.peek() == "and" {
		return rc.maskedMatch(s)
	}
	if p := c.peek(); strings.HasPrefix(p, "@") || p == "vmap" || (p == "!=" && strings.HasPrefix(c.peekAt(1), "@")) {
		return rc.lookupRelation(keyType{fields: []dataType{s.typ}})
	}
	return rc.valueMatch(s)
}

// lookupRelation compiles "@set", "!= @set", "vmap @map", "vmap { … }" and
// "{ … }" after the key was loaded into register 1.
func (rc *ruleCompiler) lookupRelation(key keyType) error {
	c := &rc.c
	invert := c.accept("!=")
	if c.accept("vmap") {
		if invert {
			return fmt.Errorf("!= vmap is not supported")
		}
		if c.peek() == "{" {
			elems, err := rc.anonMapElems(key, nil)
			if err != nil {
				return err
			}
			rc.vmap(key, "", elems)
			return nil
		}
		name, err := setRef(c.next())
		if err != nil {
			return err
		}
		rc.vmap(key, name, nil)
		return nil
	}
	name, err := setRef(c.next())
	if err != nil {
		return err
	}
	rc.lookup(name, invert)
	return nil
}

func setRef(w string) (string, error) {
	if !strings.HasPrefix(w, "@") || len(w) < 2 {
		return "", fmt.Errorf("expected @set, found %q", w)
	}
	return w[1:], nil
}

func hostU32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

// bitmaskMatch compiles "ct state new" / "ct status != dnat" / "ct state a,b".
func (rc *ruleCompiler) bitmaskMatch(s *selector) error {
	c := &rc.c
	invert := c.accept("!=")
	var mask uint32
	for _, name := range strings.Split(c.next(), ",") {
		v, ok := s.names[name]
		if !ok {
			return fmt.Errorf("unsupported value %q", name)
		}
		mask |= v
	}
	rc.bitmask(s, invert, mask)
	return nil
}

// namedMatch compiles "fib saddr type [!=] local".
func (rc *ruleCompiler) namedMatch(s *selector) error {
	c := &rc.c
	op := expr.CmpOpEq
	if c.accept("!=") {
		op = expr.CmpOpNeq
	}
	w := c.next()
	v, ok := s.names[w]
	if !ok {
		return fmt.Errorf("unsupported value %q", w)
	}
	rc.emit(&expr.Cmp{Op: op, Register: 1, Data: hostU32(v)})
	return nil
}

// maskedMatch compiles "mark and M [!=] V".
func (rc *ruleCompiler) maskedMatch(s *selector) error {
	c := &rc.c
	c.next() // and
	mask, err := parseU32(c.next())
	if err != nil {
		return err
	}
	op := expr.CmpOpEq
	if c.accept("!=") {
		op = expr.CmpOpNeq
	}
	v, err := parseU32(c.next())
	if err != nil {
		return err
	}
	rc.masked(mask, op, v)
	return nil
}

func parseU32(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return 0, fmt.Errorf("bad number %q", s)
	}
	return uint32(v), nil
}

// valueMatch compiles "[!=] value", "[!=] prefix", "[!=] a-b", "[!=] { … }" and
// interface names with a trailing "*".
func (rc *ruleCompiler) valueMatch(s *selector) error {
	c := &rc.c
	invert := c.accept("!=")
	if !invert {
		c.accept("==")
	}
	op := expr.CmpOpEq
	if invert {
		op = expr.CmpOpNeq
	}
	if c.accept("{") {
		var items []string
		for !c.accept("}") {
			if c.done() {
				return fmt.Errorf("unterminated { }")
			}
			w := c.next()
			if w != "," {
				items = append(items, w)
			}
		}
		if len(items) == 1 {
			return rc.singleValue(s, op, items[0])
		}
		return rc.anonSetOf(s.typ, items, invert)
	}
	if c.done() {
		return fmt.Errorf("missing value after %s", s.typ.name)
	}
	return rc.singleValue(s, op, c.toks[c.next0()].text)
}

// next0 consumes the next token (quoted or not) and returns its index.
func (c *cursor) next0() int { c.pos++; return c.pos - 1 }

func (rc *ruleCompiler) singleValue(s *selector, op expr.CmpOp, v string) error {
	t := s.typ
	switch {
	case t.name == "ifname" && strings.HasSuffix(v, "*"):
		rc.emit(&expr.Cmp{Op: op, Register: 1, Data: []byte(strings.TrimSuffix(v, "*"))})
		return nil
	case (t.name == "ipv4_addr" || t.name == "ipv6_addr") && strings.Contains(v, "-"):
		iv, err := parseInterval(t, v)
		if err != nil {
			return err
		}
		if op == expr.CmpOpEq {
			rc.emit(&expr.Cmp{Op: expr.CmpOpGte, Register: 1, Data: iv.first}, &expr.Cmp{Op: expr.CmpOpLte, Register: 1, Data: iv.last})
		} else {
			rc.emit(&expr.Range{Op: expr.CmpOpNeq, Register: 1, FromData: iv.first, ToData: iv.last})
		}
		return nil
	case (t.name == "ipv4_addr" || t.name == "ipv6_addr") && strings.Contains(v, "/"):
		iv, err := parseInterval(t, v)
		if err != nil {
			return err
		}
		rc.prefixMatch(op, iv)
		return nil
	}
	b, err := encodeValue(nil, t, v)
	if err != nil {
		return err
	}
	rc.emit(&expr.Cmp{Op: op, Register: 1, Data: b})
	return nil
}

// prefixBits returns the prefix length of a CIDR interval.
func prefixBits(iv interval) int {
	bits := 0
	for i := range iv.first {
		x := iv.first[i] ^ iv.last[i]
		if x == 0 {
			bits += 8
			continue
		}
		for x&0x80 == 0 {
			bits++
			x <<= 1
		}
		break
	}
	return bits
}

// markSetStmt compiles "mark set mark or|xor|and X", "meta mark set meta mark | X"
// and "mark set X".
func (rc *ruleCompiler) markSetStmt() error {
	c := &rc.c
	if c.accept("meta") {
		c.next() // mark
	} else {
		c.next() // mark
	}
	c.next() // set
	if c.peek() == "mark" || c.peek() == "meta" {
		if c.accept("meta") {
			if err := c.expect("mark"); err != nil {
				return err
			}
		} else {
			c.next()
		}
		opw := c.next()
		v, err := parseU32(c.next())
		if err != nil {
			return err
		}
		switch opw {
		case "or", "|":
			rc.markSet(markOr, v)
		case "xor", "^":
			rc.markSet(markXor, v)
		case "and", "&":
			rc.markSet(markAnd, v)
		default:
			return fmt.Errorf("unsupported mark operator %q", opw)
		}
		return nil
	}
	v, err := parseU32(c.next())
	if err != nil {
		return err
	}
	rc.emit(&expr.Immediate{Register: 1, Data: hostU32(v)},
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1, SourceRegister: true})
	return nil
}

// dynsetStmt compiles "update @set { selector }" and "add @set { selector }".
func (rc *ruleCompiler) dynsetStmt() error {
	c := &rc.c
	op := uint32(unix.NFT_DYNSET_OP_UPDATE)
	if c.next() == "add" {
		op = unix.NFT_DYNSET_OP_ADD
	}
	name, err := setRef(c.next())
	if err != nil {
		return err
	}
	if err := c.expect("{"); err != nil {
		return err
	}
	var sels []*selector
	for {
		s, err := rc.selector()
		if err != nil {
			return err
		}
		sels = append(sels, s)
		if !c.accept(".") {
			break
		}
	}
	if err := c.expect("}"); err != nil {
		return err
	}
	return rc.dynset(op, name, sels)
}

// natStmt compiles "dnat [ip|ip6] to addr[:port]" and "dnat ip|ip6 addr . port to
// numgen random mod N map { … }" or "dnat ip|ip6 addr . port to KEY map @map", KEY
// being a selector or a concatenation of selectors.
func (rc *ruleCompiler) natStmt() error {
	c := &rc.c
	typ := expr.NATTypeDestNAT
	if c.next() == "snat" {
		typ = expr.NATTypeSourceNAT
	}
	fam := rc.family
	if c.peek() == "ip" || c.peek() == "ip6" {
		fam = c.next()
	}
	if fam != rc.family {
		return fmt.Errorf("%s nat in a %s table", fam, rc.family)
	}
	n, addrType := natFamily(typ, fam == "ip6")
	if c.accept("addr") {
		if err := c.expect("."); err != nil {
			return err
		}
		if err := c.expect("port"); err != nil {
			return err
		}
		if err := c.expect("to"); err != nil {
			return err
		}
		var sels []*selector
		for {
			s, err := rc.selector()
			if err != nil {
				return err
			}
			sels = append(sels, s)
			if !c.accept(".") {
				break
			}
		}
		if err := c.expect("map"); err != nil {
			return err
		}
		if strings.HasPrefix(c.peek(), "@") {
			name, err := setRef(c.next())
			if err != nil {
				return err
			}
			return rc.natMap(n, addrType, sels, name, nil)
		}
		if len(sels) != 1 {
			return fmt.Errorf("anonymous nat maps of concatenations are not supported")
		}
		elems, err := rc.anonMapElems(keyType{fields: []dataType{sels[0].typ}}, natMapData(addrType))
		if err != nil {
			return err
		}
		return rc.natMap(n, addrType, sels, "", elems)
	}
	if err := c.expect("to"); err != nil {
		return err
	}
	target := c.next()
	addr, port := target, ""
	if strings.HasPrefix(target, "[") {
		end := strings.Index(target, "]")
		if end < 0 {
			return fmt.Errorf("bad nat target %q", target)
		}
		addr = target[1:end]
		if rest := target[end+1:]; rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return fmt.Errorf("bad nat target %q", target)
			}
			port = rest[1:]
		}
	} else if fam == "ip" {
		if a, p, ok := strings.Cut(target, ":"); ok {
			addr, port = a, p
		}
	}
	ab, err := encodeValue(nil, addrType, addr)
	if err != nil {
		return err
	}
	var pb []byte
	if port != "" {
		if pb, err = encodeValue(nil, dataTypes["inet_service"], port); err != nil {
			return err
		}
	}
	n.Random, n.FullyRandom, n.Persistent = natFlags(c)
	rc.natTo(n, ab, pb)
	return nil
}

// natFlags reads the flags nft accepts after masquerade, dnat and snat.
func natFlags(c *cursor) (random, fullyRandom, persistent bool) {
	for {
		switch {
		case c.accept("random"):
			random = true
		case c.accept("fully-random"):
			fullyRandom = true
		case c.accept("persistent"):
			persistent = true
		default:
			return random, fullyRandom, persistent
		}
	}
}
