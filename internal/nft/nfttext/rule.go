package nfttext

// The syntax tree of one rule: its statements as written, in order. Values stay
// the words of the text (an address, a prefix, a range, a protocol name, a ct
// state): what a word means depends on the reader (a tracer compares packets with
// it, a writer encodes it), so the parser only checks the structure.

// Rule is one rule: its statements in order and its comment.
type Rule struct {
	Stmts   []Stmt
	Comment string
}

// Stmt is one statement of a rule: Match, VMap, Verdict, Reject, Counter, Log,
// MarkSet, NAT, Masquerade or Dynset.
type Stmt interface{ stmt() }

// Selector is one value a rule reads from the packet or its metadata.
type Selector struct {
	// Name is the selector's canonical spelling: "ip saddr", "ip6 nexthdr", "meta
	// l4proto", "meta mark", "meta iifname", "th dport", "tcp sport", "ct state",
	// "fib daddr type", "numgen random" ("mark" and "iifname" read as "meta mark"
	// and "meta iifname").
	Name string
	// Type is nft's data type of the selector's value: ipv4_addr, ipv6_addr,
	// inet_proto, inet_service, mark, ifname, nf_proto, fib_addrtype, ct_state,
	// ct_status or integer.
	Type string
	// Mod and Offset are numgen's "mod N offset M".
	Mod, Offset uint32
	// Iface is fib's "iif" or "oif" in "fib daddr . iif type".
	Iface string
	// Ops are bitwise operations with constants applied to the value, in order:
	// "mark and 0x4000".
	Ops []BitOp
}

// BitOp is "and|&", "or||" or "xor|^" with a constant; Op is '&', '|' or '^'.
type BitOp struct {
	Op    byte
	Value uint32
}

// Expr is a selector or a concatenation of selectors ("a . b . c").
type Expr []Selector

// Match compares Left with a named set (Set) or with alternatives (Elems), each
// one word per selector of Left: a literal, a comma list ("established,related")
// or, when Braced, an anonymous set "{ a, b }".
type Match struct {
	Left   Expr
	Neq    bool
	Set    string
	Elems  [][]string
	Braced bool
}

// MapElem is one element of an anonymous map, or of a named map's listing: Key
// maps to Verdict (a verdict map) or to the words of Data (a data map: "10.0.0.1 .
// 80" is two words). Text is the element as written, for traces.
type MapElem struct {
	Key     []string
	Verdict *Verdict
	Data    []string
	Text    string
}

// MapRef looks Key up in the named map Name or, when Name is empty, in the
// anonymous map of Elems.
type MapRef struct {
	Key   Expr
	Name  string
	Elems []MapElem
}

// VMap is "KEY vmap @map" or "KEY vmap { k : verdict, … }".
type VMap struct{ MapRef }

// Verdict is accept, drop, continue, return, "jump C" or "goto C" (and "reject",
// in a verdict map's element, see ParseVerdict).
type Verdict struct {
	Kind  string
	Chain string
}

// Reject is "reject [with …]"; With holds the words after "with".
type Reject struct{ With []string }

// Counter is "counter", "counter name N" or "counter packets P bytes B" (Values).
type Counter struct {
	Name           string
	Values         bool
	Packets, Bytes uint64
}

// Log is "log [prefix S] [level L] …"; Options holds the words after "log".
type Log struct{ Options []string }

// MarkSet is "meta mark set VALUE": From (the mark, with its bitwise operations)
// when not nil, else the constant Value.
type MarkSet struct {
	From  *Selector
	Value uint32
}

// NAT is "dnat|snat [ip|ip6] [addr . port] to TARGET [flags]": TARGET is the words
// of To ("10.0.0.1:80", "[fd00::1]:80", or "10.0.0.1" "80" from "ADDR . PORT") or,
// when Map is not nil, a map lookup ("to KEY map @m").
type NAT struct {
	Kind     string // "dnat" or "snat"
	Family   string // "ip", "ip6" or ""
	AddrPort bool   // "addr . port"
	To       []string
	Map      *MapRef
	Flags    []string // random, fully-random, persistent
}

// Masquerade is "masquerade [flags]".
type Masquerade struct{ Flags []string }

// Dynset is "add|update @set { KEY [timeout T] }".
type Dynset struct {
	Op      string // "add" or "update"
	Set     string
	Key     Expr
	Timeout string
}

func (Match) stmt()      {}
func (VMap) stmt()       {}
func (Verdict) stmt()    {}
func (Reject) stmt()     {}
func (Counter) stmt()    {}
func (Log) stmt()        {}
func (MarkSet) stmt()    {}
func (NAT) stmt()        {}
func (Masquerade) stmt() {}
func (Dynset) stmt()     {}
