package ipttrace

import (
	"fmt"
	"net/netip"

	"github.com/kproxy/kproxy/internal/trace"
)

// protoNumbers are the protocol names of trace.Packet and of iptables' "-p"
// (iptables-save prints /etc/protocols names: "ipv6-icmp" for ICMPv6).
var protoNumbers = map[string]uint8{
	"icmp": 1, "tcp": 6, "udp": 17, "dccp": 33, "ipv6-icmp": 58, "icmpv6": 58,
	"sctp": 132, "udplite": 136,
}

// portProtocols are the protocols whose ports the tcp/udp/sctp/multiport matches see.
var portProtocols = map[uint8]bool{6: true, 17: true, 33: true, 132: true, 136: true}

// ctStates are the conntrack states a trace.Packet may have.
var ctStates = map[string]bool{"new": true, "established": true, "related": true, "invalid": true, "untracked": true}

// pktState is the mutable state of the packet during one traced path.
type pktState struct {
	src, dst         netip.Addr
	proto            uint8
	sport, dport     uint16
	iif, oif         string
	oifGiven         bool // the caller fixed the output interface
	locallyGenerated bool
	mark             uint32
	ctState          string
	dnat, snat       bool // the connection's NAT so far (conntrack's DNAT/SNAT virtual states)
}

func newPacketState(p trace.Packet, v6 bool) (pktState, error) {
	var s pktState
	src, err := netip.ParseAddr(p.SourceIP)
	if err != nil {
		return s, fmt.Errorf("bad packet source IP %q: %w", p.SourceIP, err)
	}
	dst, err := netip.ParseAddr(p.DestIP)
	if err != nil {
		return s, fmt.Errorf("bad packet destination IP %q: %w", p.DestIP, err)
	}
	src, dst = src.Unmap(), dst.Unmap()
	if src.Is6() != v6 || dst.Is6() != v6 {
		return s, fmt.Errorf("packet %s -> %s is not of the rules' family (%s)", src, dst, familyName(v6))
	}
	proto := p.Protocol
	if proto == "" {
		proto = "tcp"
	}
	n, ok := protoNumbers[proto]
	if !ok {
		return s, fmt.Errorf("unknown packet protocol %q", p.Protocol)
	}
	state := p.CTState
	if state == "" {
		state = "new"
	}
	if !ctStates[state] {
		return s, fmt.Errorf("unknown packet conntrack state %q", p.CTState)
	}
	if p.SourcePort < 0 || p.SourcePort > 65535 || p.DestPort < 0 || p.DestPort > 65535 {
		return s, fmt.Errorf("bad packet ports %d -> %d", p.SourcePort, p.DestPort)
	}
	return pktState{
		src: src, dst: dst, proto: n,
		sport: uint16(p.SourcePort), dport: uint16(p.DestPort),
		iif: p.InputInterface, oif: p.OutputInterface, oifGiven: p.OutputInterface != "",
		locallyGenerated: p.LocallyGenerated, mark: p.Mark, ctState: state,
	}, nil
}

func familyName(v6 bool) string {
	if v6 {
		return "IPv6"
	}
	return "IPv4"
}
