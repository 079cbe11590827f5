package nfttrace

import (
	"fmt"
	"maps"
	"net/netip"

	"github.com/kproxy/kproxy/internal/trace"
)

// pktState is the mutable state of the packet during one traced path.
type pktState struct {
	v6               bool
	src, dst         netip.Addr
	proto            uint64
	sport, dport     uint64
	iif, oif         string
	oifGiven         bool // the caller fixed the output interface
	locallyGenerated bool
	mark             uint32
	ctState          string
	ctStatus         map[string]bool
}

func newPacketState(p trace.Packet) (pktState, error) {
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
	if src.Is4() != dst.Is4() {
		return s, fmt.Errorf("packet source %s and destination %s are of different families", src, dst)
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
		v6: src.Is6(), src: src, dst: dst, proto: n,
		sport: uint64(p.SourcePort), dport: uint64(p.DestPort),
		iif: p.InputInterface, oif: p.OutputInterface, oifGiven: p.OutputInterface != "",
		locallyGenerated: p.LocallyGenerated, mark: p.Mark,
		ctState: state, ctStatus: map[string]bool{},
	}, nil
}

func (s pktState) clone() pktState {
	s.ctStatus = maps.Clone(s.ctStatus)
	return s
}

// hasPorts says whether the protocol has a transport header with ports ("th dport").
func (s pktState) hasPorts() bool {
	switch s.proto {
	case 6, 17, 33, 132, 136:
		return true
	}
	return false
}
