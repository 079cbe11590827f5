package nft

import "strconv"

// Family is the address family of a table: it spells the payload keywords and the
// dnat address type.
type Family uint8

const (
	IPv4 Family = iota + 1
	IPv6
)

func (f Family) keyword() string {
	if f == IPv6 {
		return "ip6"
	}
	return "ip"
}

// KeyKind is a selector: what a match compares, a map looks up or a set update
// adds.
type KeyKind uint8

const (
	KeyIPSaddr KeyKind = iota + 1
	KeyIPDaddr
	KeyIP6Saddr
	KeyIP6Daddr
	KeyTHDport   // th dport: the destination port of any transport protocol
	KeyTCPDport  // tcp dport: nft first matches meta l4proto tcp
	KeyUDPDport  // udp dport
	KeySCTPDport // sctp dport
	KeyL4Proto   // meta l4proto
	KeyMark      // mark (meta mark)
	KeyIIFName   // iifname
	KeyCtState   // ct state
	KeyCtStatus  // ct status
	KeyFibSaddrType
	KeyFibDaddrType
	KeyNumgen // numgen random mod Key.Mod [offset Key.Offset]
	KeyOIFName
	KeyTHSport // th sport
)

var keyNames = [...]string{
	KeyIPSaddr: "ip saddr", KeyIPDaddr: "ip daddr", KeyIP6Saddr: "ip6 saddr", KeyIP6Daddr: "ip6 daddr",
	KeyTHDport: "th dport", KeyTCPDport: "tcp dport", KeyUDPDport: "udp dport", KeySCTPDport: "sctp dport",
	KeyL4Proto: "meta l4proto", KeyMark: "mark", KeyIIFName: "iifname",
	KeyCtState: "ct state", KeyCtStatus: "ct status",
	KeyFibSaddrType: "fib saddr type", KeyFibDaddrType: "fib daddr type",
	KeyNumgen: "numgen random mod", KeyOIFName: "oifname", KeyTHSport: "th sport",
}

// Key is one selector; Mod and Offset are the modulus and offset of KeyNumgen
// (zero otherwise).
type Key struct {
	Kind   KeyKind
	Mod    uint32
	Offset uint32
}

// Keys the renderer uses as they are.
var (
	THDport      = Key{Kind: KeyTHDport}
	L4Proto      = Key{Kind: KeyL4Proto}
	Mark         = Key{Kind: KeyMark}
	IIFName      = Key{Kind: KeyIIFName}
	CtStateKey   = Key{Kind: KeyCtState}
	CtStatusKey  = Key{Kind: KeyCtStatus}
	FibSaddrType = Key{Kind: KeyFibSaddrType}
	FibDaddrType = Key{Kind: KeyFibDaddrType}
)

// Saddr is `ip saddr` or `ip6 saddr`.
func Saddr(f Family) Key {
	if f == IPv6 {
		return Key{Kind: KeyIP6Saddr}
	}
	return Key{Kind: KeyIPSaddr}
}

// Daddr is `ip daddr` or `ip6 daddr`.
func Daddr(f Family) Key {
	if f == IPv6 {
		return Key{Kind: KeyIP6Daddr}
	}
	return Key{Kind: KeyIPDaddr}
}

// Dport is `tcp dport`, `udp dport` or `sctp dport`; ok is false for other
// protocols.
func Dport(p Proto) (k Key, ok bool) {
	switch p {
	case TCP:
		return Key{Kind: KeyTCPDport}, true
	case UDP:
		return Key{Kind: KeyUDPDport}, true
	case SCTP:
		return Key{Kind: KeySCTPDport}, true
	}
	return Key{}, false
}

// Numgen is `numgen random mod n`.
func Numgen(n uint32) Key { return Key{Kind: KeyNumgen, Mod: n} }

// String is the key's text ("ip daddr", "numgen random mod 2").
func (k Key) String() string { return string(k.appendText(nil)) }

func (k Key) appendText(b []byte) []byte {
	b = append(b, keyNames[k.Kind]...)
	if k.Kind == KeyNumgen {
		b = append(b, ' ')
		b = strconv.AppendUint(b, uint64(k.Mod), 10)
		if k.Offset != 0 {
			b = append(b, " offset "...)
			b = strconv.AppendUint(b, uint64(k.Offset), 10)
		}
	}
	return b
}

func appendKeys(b []byte, keys []Key) []byte {
	for i, k := range keys {
		if i > 0 {
			b = append(b, " . "...)
		}
		b = k.appendText(b)
	}
	return b
}
