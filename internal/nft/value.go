package nft

import (
	"net/netip"
	"slices"
	"strconv"
)

// Value is the right side of a Match: Addr, Prefix, Range, Num, Proto, Ifname,
// CtState, CtStatus, FibType, Set or SetRef.
type Value interface {
	appendText(b []byte) []byte
	equal(o Value) bool
}

// Addr is one address.
type Addr netip.Addr

func (a Addr) appendText(b []byte) []byte { return netip.Addr(a).AppendTo(b) }
func (a Addr) equal(o Value) bool         { n, ok := o.(Addr); return ok && a == n }

// Prefix is an address prefix; the renderer masks it (nft refuses host bits).
type Prefix netip.Prefix

func (p Prefix) appendText(b []byte) []byte { return netip.Prefix(p).AppendTo(b) }
func (p Prefix) equal(o Value) bool         { n, ok := o.(Prefix); return ok && p == n }

// Range is the addresses from From to To, both included: `10.0.0.1-10.0.0.5`.
type Range struct {
	From, To netip.Addr
}

func (r Range) appendText(b []byte) []byte {
	b = r.From.AppendTo(b)
	b = append(b, '-')
	return r.To.AppendTo(b)
}
func (r Range) equal(o Value) bool { n, ok := o.(Range); return ok && r == n }

// Num is a number, in decimal: a port or a numgen slot.
type Num uint32

func (n Num) appendText(b []byte) []byte { return strconv.AppendUint(b, uint64(n), 10) }
func (n Num) equal(o Value) bool         { m, ok := o.(Num); return ok && n == m }

// Proto is an IP protocol number, printed by name.
type Proto uint8

// The protocols of Services.
const (
	TCP  Proto = 6
	UDP  Proto = 17
	SCTP Proto = 132
)

// String is the protocol's nft name ("tcp"), or its number.
func (p Proto) String() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case SCTP:
		return "sctp"
	}
	return strconv.Itoa(int(p))
}

var protoNames = map[string]Proto{"icmp": 1, "igmp": 2, "tcp": TCP, "udp": UDP, "icmpv6": 58, "sctp": SCTP, "udplite": 136}

// ProtoNamed is the protocol nft names name ("tcp", "icmpv6").
func ProtoNamed(name string) (Proto, bool) { p, ok := protoNames[name]; return p, ok }

func (p Proto) appendText(b []byte) []byte { return append(b, p.String()...) }
func (p Proto) equal(o Value) bool         { n, ok := o.(Proto); return ok && p == n }

// Ifname is an interface name; Wildcard matches every name starting with Name
// (printed `Name*`).
type Ifname struct {
	Name     string
	Wildcard bool
}

func (i Ifname) appendText(b []byte) []byte {
	b = append(b, i.Name...)
	if i.Wildcard {
		b = append(b, '*')
	}
	return b
}
func (i Ifname) equal(o Value) bool { n, ok := o.(Ifname); return ok && i == n }

// CtState is a set of conntrack states (nft's bits), printed by name.
type CtState uint32

// CtStateNew is conntrack state "new".
const CtStateNew CtState = 8

var ctStateNames = []flagName{{1, "invalid"}, {2, "established"}, {4, "related"}, {8, "new"}, {64, "untracked"}}

// CtStateNamed is the conntrack state nft names name ("new").
func CtStateNamed(name string) (CtState, bool) {
	v, ok := flagNamed(name, ctStateNames)
	return CtState(v), ok
}

func (s CtState) appendText(b []byte) []byte { return appendFlags(b, uint32(s), ctStateNames) }
func (s CtState) equal(o Value) bool         { n, ok := o.(CtState); return ok && s == n }

// CtStatus is a set of conntrack status bits, printed by name.
type CtStatus uint32

// CtStatusDNAT is conntrack status "dnat".
const CtStatusDNAT CtStatus = 32

var ctStatusNames = []flagName{{1, "expected"}, {2, "seen-reply"}, {4, "assured"}, {8, "confirmed"}, {16, "snat"}, {32, "dnat"}, {512, "dying"}}

// CtStatusNamed is the conntrack status bit nft names name ("dnat").
func CtStatusNamed(name string) (CtStatus, bool) {
	v, ok := flagNamed(name, ctStatusNames)
	return CtStatus(v), ok
}

func (s CtStatus) appendText(b []byte) []byte { return appendFlags(b, uint32(s), ctStatusNames) }
func (s CtStatus) equal(o Value) bool         { n, ok := o.(CtStatus); return ok && s == n }

// FibType is a route type of a fib lookup, printed by name.
type FibType uint32

// FibLocal is route type "local" (an address of this host).
const FibLocal FibType = 2

var fibTypeNames = [...]string{"unspec", "unicast", "local", "broadcast", "anycast", "multicast", "blackhole", "unreachable", "prohibit"}

// FibTypeNamed is the route type nft names name ("local").
func FibTypeNamed(name string) (FibType, bool) {
	for i, n := range fibTypeNames {
		if n == name {
			return FibType(i), true
		}
	}
	return 0, false
}

func (t FibType) appendText(b []byte) []byte {
	if int(t) < len(fibTypeNames) {
		return append(b, fibTypeNames[t]...)
	}
	return strconv.AppendUint(b, uint64(t), 10)
}
func (t FibType) equal(o Value) bool { n, ok := o.(FibType); return ok && t == n }

// Set is an anonymous set of addresses and prefixes: `{ 10.0.0.0/8, 10.1.0.1 }`.
type Set []Value

func (s Set) appendText(b []byte) []byte {
	b = append(b, "{ "...)
	for i, v := range s {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = v.appendText(b)
	}
	return append(b, " }"...)
}

func (s Set) equal(o Value) bool {
	n, ok := o.(Set)
	return ok && slices.EqualFunc(s, n, func(a, b Value) bool { return a.equal(b) })
}

// SetRef is a named set: `@cluster-ips`.
type SetRef string

func (r SetRef) appendText(b []byte) []byte { return append(append(b, '@'), r...) }
func (r SetRef) equal(o Value) bool         { n, ok := o.(SetRef); return ok && r == n }

type flagName struct {
	bit  uint32
	name string
}

func flagNamed(name string, names []flagName) (uint32, bool) {
	for _, f := range names {
		if f.name == name {
			return f.bit, true
		}
	}
	return 0, false
}

// appendFlags writes the names of the bits of v joined by ",", as nft does.
func appendFlags(b []byte, v uint32, names []flagName) []byte {
	first := true
	for _, f := range names {
		if v&f.bit == 0 {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		b = append(b, f.name...)
		first = false
	}
	return b
}
