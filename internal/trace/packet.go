package trace

import (
	"fmt"
	"net/netip"
)

// protocols are the L4 protocol names of a Packet and of the rule languages the
// tracers read (nft's and iptables-save's, which prints /etc/protocols names:
// "ipv6-icmp" for ICMPv6), with their numbers.
var protocols = map[string]uint8{
	"icmp": 1, "igmp": 2, "tcp": 6, "udp": 17, "dccp": 33, "gre": 47, "esp": 50,
	"ah": 51, "icmpv6": 58, "ipv6-icmp": 58, "sctp": 132, "udplite": 136,
}

// ProtocolNumber returns the number of an L4 protocol name.
func ProtocolNumber(name string) (uint8, bool) {
	n, ok := protocols[name]
	return n, ok
}

// ProtocolName returns the name of an L4 protocol number (nft's spelling:
// "icmpv6"), and false for a number without one.
func ProtocolName(n uint8) (string, bool) {
	for name, num := range protocols {
		if num == n && name != "ipv6-icmp" {
			return name, true
		}
	}
	return "", false
}

// HasPorts reports whether L4 protocol number n has a header with ports (what
// nft's "th dport" and iptables' port matches see): TCP, UDP, DCCP, SCTP, UDP-Lite.
func HasPorts(n uint8) bool {
	switch n {
	case 6, 17, 33, 132, 136:
		return true
	}
	return false
}

// IsCTState reports whether s is a conntrack state a Packet may be in.
func IsCTState(s string) bool {
	switch s {
	case "new", "established", "related", "invalid", "untracked":
		return true
	}
	return false
}

// Header is a Packet's header, validated, with the defaults filled in.
type Header struct {
	// Src and Dst are of one family (IPv4-mapped IPv6 addresses are unmapped).
	Src, Dst     netip.Addr
	Proto        uint8
	SPort, DPort uint16
	// CTState is "new" when the Packet leaves it empty.
	CTState string
}

// Header validates p and returns its header: addresses of one family, a known
// protocol (TCP when empty), ports in range, a known conntrack state (new when
// empty).
func (p *Packet) Header() (Header, error) {
	src, err := netip.ParseAddr(p.SourceIP)
	if err != nil {
		return Header{}, fmt.Errorf("bad packet source IP %q: %w", p.SourceIP, err)
	}
	dst, err := netip.ParseAddr(p.DestIP)
	if err != nil {
		return Header{}, fmt.Errorf("bad packet destination IP %q: %w", p.DestIP, err)
	}
	src, dst = src.Unmap(), dst.Unmap()
	if src.Is4() != dst.Is4() {
		return Header{}, fmt.Errorf("packet source %s and destination %s are of different families", src, dst)
	}
	proto := p.Protocol
	if proto == "" {
		proto = "tcp"
	}
	n, ok := protocols[proto]
	if !ok {
		return Header{}, fmt.Errorf("unknown packet protocol %q", p.Protocol)
	}
	state := p.CTState
	if state == "" {
		state = "new"
	}
	if !IsCTState(state) {
		return Header{}, fmt.Errorf("unknown packet conntrack state %q", p.CTState)
	}
	if p.SourcePort < 0 || p.SourcePort > 65535 || p.DestPort < 0 || p.DestPort > 65535 {
		return Header{}, fmt.Errorf("bad packet ports %d -> %d", p.SourcePort, p.DestPort)
	}
	return Header{Src: src, Dst: dst, Proto: n, SPort: uint16(p.SourcePort), DPort: uint16(p.DestPort), CTState: state}, nil
}
