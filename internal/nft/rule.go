package nft

import (
	"net/netip"
	"slices"
	"strconv"
)

// Rule is one rule: its statements in order and an optional comment.
type Rule struct {
	Stmts   []Stmt
	Comment string
}

// Stmt is one statement of a rule: Match, MaskedMatch, VMap, MarkSet, Counter,
// Update, DNAT, SNAT, DNATMap, Masquerade, Reject or Verdict.
type Stmt interface {
	appendText(b []byte) []byte
	equal(o Stmt) bool
}

// AppendStatements appends the statements of r as nft text, without the comment:
// what knftables.Rule.Rule holds.
func (r *Rule) AppendStatements(b []byte) []byte {
	for i, s := range r.Stmts {
		if i > 0 {
			b = append(b, ' ')
		}
		b = s.appendText(b)
	}
	return b
}

// AppendText appends r as nft text, as it follows "add rule <family> <table>
// <chain> ": the statements, then ` comment "…"` when r has a comment.
func (r *Rule) AppendText(b []byte) []byte {
	b = r.AppendStatements(b)
	if r.Comment != "" {
		b = append(b, " comment "...)
		b = strconv.AppendQuote(b, r.Comment)
	}
	return b
}

// String returns AppendText's text.
func (r *Rule) String() string {
	// Most rules fit the stack buffer: one allocation, the string's.
	var buf [160]byte
	return string(r.AppendText(buf[:0]))
}

// Statements returns AppendStatements' text.
func (r *Rule) Statements() string {
	var buf [160]byte
	return string(r.AppendStatements(buf[:0]))
}

// Equal reports whether r and o are the same rule.
func (r *Rule) Equal(o *Rule) bool {
	return r.Comment == o.Comment && slices.EqualFunc(r.Stmts, o.Stmts, func(a, b Stmt) bool { return a.equal(b) })
}

// Match compares a key (one selector or a concatenation) with a value: `ip daddr
// @cluster-ips`, `ct state new`, `ip saddr != { 10.0.0.0/8, 10.1.0.0/16 }`.
type Match struct {
	Keys  []Key
	Neq   bool
	Value Value
}

func (m Match) appendText(b []byte) []byte {
	b = appendKeys(b, m.Keys)
	if m.Neq {
		b = append(b, " !="...)
	}
	b = append(b, ' ')
	return m.Value.appendText(b)
}

func (m Match) equal(o Stmt) bool {
	n, ok := o.(Match)
	return ok && m.Neq == n.Neq && slices.Equal(m.Keys, n.Keys) && m.Value.equal(n.Value)
}

// MaskedMatch compares Key AND Mask with Value: `mark and 0x4000 != 0`.
type MaskedMatch struct {
	Key   Key
	Mask  uint32
	Neq   bool
	Value uint32
}

func (m MaskedMatch) appendText(b []byte) []byte {
	b = m.Key.appendText(b)
	b = append(b, " and "...)
	b = appendHex(b, m.Mask)
	if m.Neq {
		b = append(b, " !="...)
	}
	b = append(b, ' ')
	return strconv.AppendUint(b, uint64(m.Value), 10)
}

func (m MaskedMatch) equal(o Stmt) bool { n, ok := o.(MaskedMatch); return ok && m == n }

// VMap looks the key up in a verdict map, the named map Map or, when Map is empty,
// the anonymous map of Elems (keys are numbers, for numgen keys).
type VMap struct {
	Keys  []Key
	Map   string
	Elems []VMapElem
}

// VMapElem is one element `N : verdict` of an anonymous verdict map, or, when
// Fields is not nil, `F1 . F2 : verdict`, its key the concatenation of Fields
// (one value per key of the VMap).
type VMapElem struct {
	Key     uint32
	Fields  []Value
	Verdict Verdict
}

func (v VMap) appendText(b []byte) []byte {
	b = appendKeys(b, v.Keys)
	if v.Map != "" {
		b = append(b, " vmap @"...)
		return append(b, v.Map...)
	}
	b = append(b, " vmap { "...)
	for i, e := range v.Elems {
		if i > 0 {
			b = append(b, " , "...)
		}
		if e.Fields != nil {
			for j, f := range e.Fields {
				if j > 0 {
					b = append(b, " . "...)
				}
				b = f.appendText(b)
			}
		} else {
			b = strconv.AppendUint(b, uint64(e.Key), 10)
		}
		b = append(b, " : "...)
		b = e.Verdict.appendText(b)
	}
	return append(b, " }"...)
}

func (v VMap) equal(o Stmt) bool {
	n, ok := o.(VMap)
	return ok && v.Map == n.Map && slices.Equal(v.Keys, n.Keys) && slices.EqualFunc(v.Elems, n.Elems, func(a, b VMapElem) bool {
		return a.Key == b.Key && a.Verdict == b.Verdict && (a.Fields == nil) == (b.Fields == nil) &&
			slices.EqualFunc(a.Fields, b.Fields, func(x, y Value) bool { return x.equal(y) })
	})
}

// BitOp is the operator of a MarkSet.
type BitOp uint8

const (
	BitOr BitOp = iota + 1
	BitXor
	BitAnd
	BitSet // the mark becomes Value: `mark set 0x10`
)

var bitOpNames = [...]string{BitOr: "or", BitXor: "xor", BitAnd: "and"}

// MarkSet sets the packet mark to the mark combined with Value: `mark set mark or
// 0x4000`, or, with BitSet, to Value: `mark set 0x10`.
type MarkSet struct {
	Op    BitOp
	Value uint32
}

func (m MarkSet) appendText(b []byte) []byte {
	b = append(b, "mark set "...)
	if m.Op != BitSet {
		b = append(b, "mark "...)
		b = append(b, bitOpNames[m.Op]...)
		b = append(b, ' ')
	}
	return appendHex(b, m.Value)
}

func (m MarkSet) equal(o Stmt) bool { n, ok := o.(MarkSet); return ok && m == n }

// Counter counts packets in an anonymous counter, or in the named counter Name.
type Counter struct {
	Name string
}

func (c Counter) appendText(b []byte) []byte {
	if c.Name == "" {
		return append(b, "counter"...)
	}
	b = append(b, "counter name "...)
	return strconv.AppendQuote(b, c.Name)
}

func (c Counter) equal(o Stmt) bool { n, ok := o.(Counter); return ok && c == n }

// Update adds the key to, or refreshes its timeout in, the dynamic set Set:
// `update @affinity-… { ip saddr }`; with Add, it adds the key without refreshing
// it: `add @set { ip saddr }`.
type Update struct {
	Set  string
	Keys []Key
	Add  bool
}

func (u Update) appendText(b []byte) []byte {
	if u.Add {
		b = append(b, "add @"...)
	} else {
		b = append(b, "update @"...)
	}
	b = append(b, u.Set...)
	b = append(b, " { "...)
	b = appendKeys(b, u.Keys)
	return append(b, " }"...)
}

func (u Update) equal(o Stmt) bool {
	n, ok := o.(Update)
	return ok && u.Set == n.Set && u.Add == n.Add && slices.Equal(u.Keys, n.Keys)
}

// DNAT rewrites the destination to To: `dnat to 10.0.0.1:80`, `dnat to
// [fd00::1]:80`; with NoPort, only the address: `dnat to 10.0.0.1`.
type DNAT struct {
	To     netip.AddrPort
	NoPort bool
}

func (d DNAT) appendText(b []byte) []byte {
	return appendNATTo(append(b, "dnat to "...), d.To, d.NoPort)
}

func (d DNAT) equal(o Stmt) bool { n, ok := o.(DNAT); return ok && d == n }

// SNAT rewrites the source to To, as DNAT the destination: `snat to 10.0.0.9`.
type SNAT DNAT

func (s SNAT) appendText(b []byte) []byte {
	return appendNATTo(append(b, "snat to "...), s.To, s.NoPort)
}

func (s SNAT) equal(o Stmt) bool { n, ok := o.(SNAT); return ok && s == n }

func appendNATTo(b []byte, to netip.AddrPort, noPort bool) []byte {
	if noPort {
		return to.Addr().AppendTo(b)
	}
	return to.AppendTo(b)
}

// DNATMap rewrites destination address and port to the value the key maps to in
// the named map Map or, when Map is empty, in the anonymous map of Elems (keys are
// numbers, for numgen keys): `dnat ip addr . port to numgen random mod 2 map { 0 :
// 10.0.0.1 . 80 , 1 : 10.0.0.2 . 80 }`.
type DNATMap struct {
	Family Family
	Keys   []Key
	Map    string
	Elems  []DNATElem
}

// DNATElem is one element `N : addr . port` of an anonymous DNAT map.
type DNATElem struct {
	Key uint32
	To  netip.AddrPort
}

func (d DNATMap) appendText(b []byte) []byte {
	b = append(b, "dnat "...)
	b = append(b, d.Family.keyword()...)
	b = append(b, " addr . port to "...)
	b = appendKeys(b, d.Keys)
	if d.Map != "" {
		b = append(b, " map @"...)
		return append(b, d.Map...)
	}
	b = append(b, " map { "...)
	for i, e := range d.Elems {
		if i > 0 {
			b = append(b, " , "...)
		}
		b = strconv.AppendUint(b, uint64(e.Key), 10)
		b = append(b, " : "...)
		b = e.To.Addr().AppendTo(b)
		b = append(b, " . "...)
		b = strconv.AppendUint(b, uint64(e.To.Port()), 10)
	}
	return append(b, " }"...)
}

func (d DNATMap) equal(o Stmt) bool {
	n, ok := o.(DNATMap)
	return ok && d.Family == n.Family && d.Map == n.Map && slices.Equal(d.Keys, n.Keys) && slices.Equal(d.Elems, n.Elems)
}

// Masquerade source-NATs to the outgoing interface's address, with nft's port
// allocation flags.
type Masquerade struct {
	FullyRandom, Random, Persistent bool
}

func (m Masquerade) appendText(b []byte) []byte {
	b = append(b, "masquerade"...)
	if m.Random {
		b = append(b, " random"...)
	}
	if m.FullyRandom {
		b = append(b, " fully-random"...)
	}
	if m.Persistent {
		b = append(b, " persistent"...)
	}
	return b
}

func (m Masquerade) equal(o Stmt) bool { n, ok := o.(Masquerade); return ok && m == n }

// Reject rejects the packet with nft's default (ICMP or ICMPv6 port unreachable).
type Reject struct{}

func (Reject) appendText(b []byte) []byte { return append(b, "reject"...) }

func (Reject) equal(o Stmt) bool { _, ok := o.(Reject); return ok }

// VerdictKind is the kind of a Verdict.
type VerdictKind uint8

const (
	Accept VerdictKind = iota + 1
	Drop
	Return
	Continue
	Jump
	Goto
)

var verdictNames = [...]string{Accept: "accept", Drop: "drop", Return: "return", Continue: "continue", Jump: "jump", Goto: "goto"}

// Verdict ends the rule; Chain is the target of Jump and Goto.
type Verdict struct {
	Kind  VerdictKind
	Chain string
}

func (v Verdict) appendText(b []byte) []byte {
	b = append(b, verdictNames[v.Kind]...)
	if v.Chain != "" {
		b = append(b, ' ')
		b = append(b, v.Chain...)
	}
	return b
}

func (v Verdict) equal(o Stmt) bool { n, ok := o.(Verdict); return ok && v == n }

func appendHex(b []byte, v uint32) []byte {
	b = append(b, "0x"...)
	return strconv.AppendUint(b, uint64(v), 16)
}
