package nfttrace

import (
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
	h, err := p.Header()
	if err != nil {
		return pktState{}, err
	}
	return pktState{
		v6: h.Src.Is6(), src: h.Src, dst: h.Dst, proto: uint64(h.Proto),
		sport: uint64(h.SPort), dport: uint64(h.DPort),
		iif: p.InputInterface, oif: p.OutputInterface, oifGiven: p.OutputInterface != "",
		locallyGenerated: p.LocallyGenerated, mark: p.Mark,
		ctState: h.CTState, ctStatus: map[string]bool{},
	}, nil
}

func (s pktState) clone() pktState {
	s.ctStatus = maps.Clone(s.ctStatus)
	return s
}

// hasPorts says whether the protocol has a transport header with ports ("th dport").
func (s pktState) hasPorts() bool { return trace.HasPorts(uint8(s.proto)) }
