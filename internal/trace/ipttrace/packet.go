package ipttrace

import (
	"fmt"
	"net/netip"

	"github.com/kproxy/kproxy/internal/trace"
)

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
	h, err := p.Header()
	if err != nil {
		return pktState{}, err
	}
	if h.Src.Is6() != v6 {
		return pktState{}, fmt.Errorf("packet %s -> %s is not of the rules' family (%s)", h.Src, h.Dst, familyName(v6))
	}
	return pktState{
		src: h.Src, dst: h.Dst, proto: h.Proto, sport: h.SPort, dport: h.DPort,
		iif: p.InputInterface, oif: p.OutputInterface, oifGiven: p.OutputInterface != "",
		locallyGenerated: p.LocallyGenerated, mark: p.Mark, ctState: h.CTState,
	}, nil
}

func familyName(v6 bool) string {
	if v6 {
		return "IPv6"
	}
	return "IPv4"
}
