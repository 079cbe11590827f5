package ipttrace

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// never is "! -p all".
type never struct{}

func (never) match(*run) (bool, error) { return false, nil }

// addrMatch is -s or -d.
type addrMatch struct {
	dst    bool
	prefix netip.Prefix
	neg    bool
}

func (m addrMatch) match(r *run) (bool, error) {
	a := r.pkt.src
	if m.dst {
		a = r.pkt.dst
	}
	return m.prefix.Contains(a) != m.neg, nil
}

// ifaceMatch is -i or -o; a name ending in "+" matches every name it prefixes. A
// packet without that interface (-i of a locally generated packet, -o before
// routing) has the empty name, as in the kernel.
type ifaceMatch struct {
	out  bool
	name string
	neg  bool
}

func (m ifaceMatch) match(r *run) (bool, error) {
	name := r.pkt.iif
	if m.out {
		name = r.pkt.oif
	}
	var ok bool
	if prefix, wild := strings.CutSuffix(m.name, "+"); wild {
		ok = strings.HasPrefix(name, prefix)
	} else {
		ok = name == m.name
	}
	return ok != m.neg, nil
}

// protoMatch is -p.
type protoMatch struct {
	proto uint8
	neg   bool
}

func (m protoMatch) match(r *run) (bool, error) {
	return (r.pkt.proto == m.proto) != m.neg, nil
}

// portMatch is --dport/--sport of -m tcp|udp|sctp and the lists of -m multiport
// (either: --ports, source or destination).
type portMatch struct {
	dst, either bool
	ranges      [][2]uint16
	neg         bool
}

func (m portMatch) match(r *run) (bool, error) {
	in := func(port uint16) bool {
		for _, rg := range m.ranges {
			if port >= rg[0] && port <= rg[1] {
				return true
			}
		}
		return false
	}
	var ok bool
	switch {
	case m.either:
		ok = in(r.pkt.sport) || in(r.pkt.dport)
	case m.dst:
		ok = in(r.pkt.dport)
	default:
		ok = in(r.pkt.sport)
	}
	return ok != m.neg, nil
}

// addrtypeMatch is --src-type or --dst-type of -m addrtype.
type addrtypeMatch struct {
	dst   bool
	types map[string]bool
	neg   bool
}

func (m addrtypeMatch) match(r *run) (bool, error) {
	a := r.pkt.src
	if m.dst {
		a = r.pkt.dst
	}
	return m.types[r.tr.addrType(a)] != m.neg, nil
}

// ctstateMatch is --ctstate of -m conntrack and --state of -m state. The virtual
// states SNAT and DNAT hold once this trace made such a binding.
type ctstateMatch struct {
	states map[string]bool
	neg    bool
}

func (m ctstateMatch) match(r *run) (bool, error) {
	ok := m.states[r.pkt.ctState] || (m.states["dnat"] && r.pkt.dnat) || (m.states["snat"] && r.pkt.snat)
	return ok != m.neg, nil
}

// ctstatusMatch is --ctstatus of -m conntrack, over the statuses a connection in
// the packet's state has: new: none (CONFIRMED once it went through POSTROUTING
// or is re-entering over loopback); established: SEEN_REPLY, ASSURED, CONFIRMED;
// related: EXPECTED; invalid and untracked packets have no connection and never
// match.
type ctstatusMatch struct {
	statuses map[string]bool
	neg      bool
}

func (m ctstatusMatch) match(r *run) (bool, error) {
	var have []string
	switch r.pkt.ctState {
	case "new":
		if r.confirmed {
			have = []string{"CONFIRMED"}
		}
	case "established":
		have = []string{"SEEN_REPLY", "ASSURED", "CONFIRMED"}
	case "related":
		have = []string{"EXPECTED"}
	}
	ok := false
	for _, s := range have {
		ok = ok || m.statuses[s]
	}
	return ok != m.neg, nil
}

// markMatch is --mark V/M of -m mark.
type markMatch struct {
	value, mask uint32
	neg         bool
}

func (m markMatch) match(r *run) (bool, error) {
	return (r.pkt.mark&m.mask == m.value) != m.neg, nil
}

// statisticMatch is -m statistic --mode random: both outcomes are explored (the
// first path takes the match), each weighted by its probability.
type statisticMatch struct {
	p   float64
	neg bool
}

func (m statisticMatch) match(r *run) (bool, error) {
	hit := r.chance(m.p)
	if hit != m.neg {
		r.pending = append(r.pending, fmt.Sprintf("    random choice: matched (probability %g)", r.lastChance))
		return true, nil
	}
	r.skipped = fmt.Sprintf("random choice: not matched (probability %g)", r.lastChance)
	return false, nil
}

// recentMatch is -m recent. Lists are not learnt while tracing: they hold what the
// caller gave (Tracer.WithRecent), empty otherwise, so --set always matches and adds
// nothing, and --rcheck, --update and --remove match the source (--rdest: the
// destination), masked, when it is in the list.
type recentMatch struct {
	name  string
	cmd   string
	bits  int
	rdest bool
	neg   bool
}

func (m recentMatch) match(r *run) (bool, error) {
	if m.cmd == "--set" {
		r.pending = append(r.pending, fmt.Sprintf("    recent --set %s: not recorded (lists are given to the tracer)", m.name))
		return !m.neg, nil
	}
	a := r.pkt.src
	if m.rdest {
		a = r.pkt.dst
	}
	key, err := a.Prefix(m.bits)
	if err != nil {
		return false, fmt.Errorf("recent mask: %w", err)
	}
	ok := false
	for _, e := range r.tr.recent[m.name] {
		if p, err := e.Prefix(m.bits); err == nil && p == key {
			ok = true
		}
	}
	if ok {
		r.pending = append(r.pending, fmt.Sprintf("    recent %s: %s is in list %s", m.cmd, a, m.name))
	}
	return ok != m.neg, nil
}

// physdevMatch is "[!] --physdev-is-in" of -m physdev: the packet came in through
// a port of a bridge whose bridged packets br_netfilter shows to iptables
// (Tracer.WithBridged); none does unless given.
type physdevMatch struct {
	neg bool
}

func (m physdevMatch) match(r *run) (bool, error) {
	return r.tr.bridged[r.pkt.iif] != m.neg, nil
}

// ipvsMatch is -m ipvs. "--ipvs" sees whether IPVS handled the packet in this
// trace (the skb's ipvs_property). The other options first need that property
// (and --vproto the protocol), then xt_ipvs looks the packet's IPVS connection up
// in the reply direction (conn_out_get): that lookup is not modelled, so reaching
// it is an error.
type ipvsMatch struct {
	onlyProperty bool
	propertyNeg  bool
	proto        uint8
	hasProto     bool
	protoNeg     bool
}

func (m ipvsMatch) match(r *run) (bool, error) {
	if m.onlyProperty {
		return r.ipvsHandled != m.propertyNeg, nil
	}
	if !r.ipvsHandled {
		return false, nil
	}
	if m.hasProto && (r.pkt.proto == m.proto) == m.protoNeg {
		return false, nil
	}
	return false, errors.New("-m ipvs: the lookup of the packet's IPVS connection (--vaddr, --vport, --vdir, --vmethod, --vportctl) is not modelled")
}
