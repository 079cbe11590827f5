package ipttrace

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/kproxy/kproxy/internal/trace"
)

// Balancer is a load balancer the kernel runs between the tables of a hook: IPVS
// (internal/trace/ipvstrace implements it). The walker calls it where the kernel
// calls ip_vs_in: at LOCAL_IN after filter and security (priority 99, before nat's
// SNAT at 100) for a packet to a local address, and at LOCAL_OUT after nat's DNAT
// (priority -98) for a locally generated one, once per packet.
type Balancer interface {
	// Balance says what IPVS does with the packet c (its header as it reaches
	// the hook). An error means it cannot be said (the error says what is not
	// modelled).
	Balance(c Conn) (Balancing, error)
}

// Conn is the packet a Balancer sees.
type Conn struct {
	Src, Dst     netip.Addr
	Proto        uint8
	SPort, DPort uint16
	Mark         uint32
	// CTState is the packet's conntrack state ("new", ...).
	CTState string
	// LocalOut: at LOCAL_OUT (a locally generated packet); else LOCAL_IN.
	LocalOut bool
}

// Balancing is what a Balancer does with a packet.
type Balancing struct {
	// Taken: a virtual server takes the packet. When not, it goes on
	// untouched.
	Taken bool
	// Notes explain the decision (the virtual server, its scheduler,
	// persistence); they go into the trace.
	Notes []string
	// Targets are the real servers the packet may be sent to, each with its
	// share (the shares add up to 1). Taken without targets: IPVS answers ICMP
	// port unreachable and drops the packet (ip_vs_leave).
	Targets []Target
	// Untracked: IPVS takes the packet out of conntrack as it DNATs it
	// (ip_vs_notrack, without IPVS's conntrack sysctl), so the nat table
	// and -m conntrack see it untracked from there on.
	Untracked bool
}

// Target is one real server a packet may be DNATed to.
type Target struct {
	AddrPort netip.AddrPort
	Share    float64
}

// ipvsTable names the IPVS step among a hook's tables.
const ipvsTable = "ipvs"

// hookOrderIPVS is hookOrder with IPVS's ip_vs_in where the kernel registers it:
// NF_IP_PRI_NAT_SRC - 1 at LOCAL_IN, NF_IP_PRI_NAT_DST + 2 at LOCAL_OUT (its
// reply hook, ip_vs_out, only sees replies, which a trace never is).
var hookOrderIPVS = map[string][]hookTable{
	"PREROUTING":  hookOrder["PREROUTING"],
	"INPUT":       {{"mangle", -150}, {"filter", 0}, {"security", 50}, {ipvsTable, 99}, {"nat", 100}},
	"FORWARD":     hookOrder["FORWARD"],
	"OUTPUT":      {{"raw", -300}, {"mangle", -150}, {"nat", -100}, {ipvsTable, -98}, {"filter", 0}, {"security", 50}},
	"POSTROUTING": hookOrder["POSTROUTING"],
}

// WithBalancer returns a copy of the Tracer with IPVS b in the hooks.
func (t *Tracer) WithBalancer(b Balancer) *Tracer {
	c := *t
	c.balancer = b
	return &c
}

// hookTables are the tables (and IPVS) run at hook, in priority order.
func (t *Tracer) hookTables(hook string) []hookTable {
	if t.balancer == nil {
		return hookOrder[hook]
	}
	return hookOrderIPVS[hook]
}

// balance runs IPVS at hook. It returns true when the packet goes no further in
// this hook: rejected (no real server), or DNATed to a real server that is not
// local, which IPVS sends out itself (r.stolen). A local real server's packet
// goes on through the hook (ip_vs_nat_send_or_cont returns NF_ACCEPT).
func (r *run) balance(hook string, priority int) (bool, error) {
	if r.ipvsHandled {
		return false, nil // ipvs_property: IPVS does not look at its own packets again
	}
	b, err := r.tr.balancer.Balance(Conn{
		Src: r.pkt.src, Dst: r.pkt.dst, Proto: r.pkt.proto, SPort: r.pkt.sport, DPort: r.pkt.dport,
		Mark: r.pkt.mark, CTState: r.pkt.ctState, LocalOut: hook == "OUTPUT",
	})
	if err != nil {
		return false, fmt.Errorf("IPVS at %s: %w", hook, err)
	}
	if !b.Taken {
		return false, nil
	}
	r.note(fmt.Sprintf("ipvs %s (hook %s, priority %d: ip_vs_in)", hook, strings.ToLower(hook), priority))
	for _, n := range b.Notes {
		r.note("  " + n)
	}
	if len(b.Targets) == 0 {
		r.out.Verdict = trace.Reject
		return true, nil
	}
	i := 0
	if len(b.Targets) > 1 {
		i = r.choices.Choose(len(b.Targets))
	}
	tg := b.Targets[i]
	r.out.Probability *= tg.Share
	r.note(fmt.Sprintf("    real server %s (share %g)", tg.AddrPort, tg.Share))
	// The routes IPVS refuses (__ip_vs_get_out_rt, ip_vs_nat_xmit): the packet
	// is dropped.
	switch local := r.tr.isLocal(tg.AddrPort.Addr()); {
	case !local && r.pkt.src.IsLoopback():
		r.note("    IPVS drops it: traffic from a loopback address to a real server elsewhere")
		r.out.Verdict = trace.Drop
		return true, nil
	case tg.AddrPort.Addr().IsLoopback() && hook == "INPUT":
		r.note("    IPVS drops it: an arriving packet DNATed to a loopback address")
		r.out.Verdict = trace.Drop
		return true, nil
	}
	r.pkt.dst, r.pkt.dport = tg.AddrPort.Addr(), tg.AddrPort.Port()
	r.out.DNAT = tg.AddrPort.String()
	r.natDone["dst"] = true
	r.ipvsHandled = true
	if b.Untracked {
		r.pkt.ctState = "untracked"
		r.note("    IPVS's conntrack sysctl is off: the packet leaves conntrack, nat ignores it")
	}
	if r.tr.isLocal(r.pkt.dst) {
		r.note("    a local real server: the packet goes on through " + hook)
		return false, nil
	}
	r.stolen = true
	return true, nil
}

// reinject follows a packet IPVS DNATed to a real server elsewhere: IPVS sends it
// through the LOCAL_OUT hook itself (ip_vs_nat_send_or_cont, with no input
// interface; nat does not run again, the connection's DNAT being decided), then
// out through POSTROUTING.
func (r *run) reinject() error {
	r.note("  IPVS sends the packet out through LOCAL_OUT, then POSTROUTING")
	r.pkt.iif = ""
	r.routeOutput()
	for _, hook := range []string{"OUTPUT", "POSTROUTING"} {
		if done, err := r.runHook(hook); done || err != nil {
			return err
		}
	}
	return nil
}
