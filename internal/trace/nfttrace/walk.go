package nfttrace

import (
	"fmt"
	"sort"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/trace"
)

// run is one traced path of a packet (one sequence of numgen choices).
type run struct {
	tr     *Tracer
	tables []tableRef
	pkt    pktState
	out    trace.Outcome

	choices *trace.Choices // the random choices of this path

	pending []string // notes about the current rule, shown after it if it matches

	natDone map[string]bool // NAT manip types ("dst"/"src") already bound
	skipNAT bool            // loopback re-entry: the connection's NAT is already decided

	// the base chain being run, to check nat statements are legal there
	baseHook string
	baseType knftables.BaseChainType
}

// baseChain is a base chain attached to the hook being run.
type baseChain struct {
	tbl      tableRef
	chain    *knftables.FakeChain
	priority int
}

// walk sends the packet along its path, stopping at the first drop or reject.
func (r *run) walk() error {
	r.out.Verdict = trace.Accept
	if r.pkt.locallyGenerated {
		r.pkt.iif = ""
		r.routeOutput()
		for _, hook := range []knftables.BaseChainHook{knftables.OutputHook, knftables.PostroutingHook} {
			if done, err := r.runHook(hook); done || err != nil {
				return err
			}
			r.routeOutput() // a DNAT in output re-routes the packet
		}
		if !r.tr.isLocal(r.pkt.dst) {
			return nil
		}
		// Delivered over loopback: it re-enters at prerouting, then input.
		r.skipNAT = true
		r.pkt.iif, r.pkt.oif = "lo", ""
		for _, hook := range []knftables.BaseChainHook{knftables.PreroutingHook, knftables.InputHook} {
			if done, err := r.runHook(hook); done || err != nil {
				return err
			}
		}
		return nil
	}

	if done, err := r.runHook(knftables.PreroutingHook); done || err != nil {
		return err
	}
	hooks := []knftables.BaseChainHook{knftables.ForwardHook, knftables.PostroutingHook}
	if r.tr.isLocal(r.pkt.dst) {
		r.pkt.oif = ""
		hooks = []knftables.BaseChainHook{knftables.InputHook}
	}
	for _, hook := range hooks {
		if done, err := r.runHook(hook); done || err != nil {
			return err
		}
	}
	return nil
}

// routeOutput picks "lo" as the output interface of a locally generated packet to a
// local address, unless the caller fixed the interface.
func (r *run) routeOutput() {
	if r.pkt.oifGiven {
		return
	}
	r.pkt.oif = ""
	if r.tr.isLocal(r.pkt.dst) {
		r.pkt.oif = "lo"
	}
}

// natManip is the kind of NAT binding made at a hook.
func natManip(hook knftables.BaseChainHook) string {
	if hook == knftables.PreroutingHook || hook == knftables.OutputHook {
		return "dst"
	}
	return "src"
}

// runHook runs the base chains of one hook in priority order. It returns true when
// the packet was dropped or rejected.
func (r *run) runHook(hook knftables.BaseChainHook) (bool, error) {
	chains, err := r.baseChains(hook)
	if err != nil {
		return false, err
	}
	for _, bc := range chains {
		ctype := knftables.FilterType
		if bc.chain.Type != nil {
			ctype = *bc.chain.Type
		}
		if ctype == knftables.NATType {
			// The kernel consults nat chains only for the first packet of a
			// connection, and only until one of them makes a binding.
			if r.skipNAT || r.pkt.ctState != "new" || r.natDone[natManip(hook)] {
				continue
			}
		}
		r.baseHook, r.baseType = string(hook), ctype
		r.note(fmt.Sprintf("%s (hook %s, type %s, priority %d)", bc.tbl.chainName(bc.chain.Name), hook, ctype, bc.priority))
		v, err := r.runChain(bc.tbl, bc.chain.Name, 0)
		if err != nil {
			return false, err
		}
		if v == vNone && bc.chain.Policy != nil && *bc.chain.Policy == knftables.DropPolicy {
			r.note("  policy drop")
			v = vDrop
		}
		switch v {
		case vDrop:
			r.out.Verdict = trace.Drop
			return true, nil
		case vReject:
			r.out.Verdict = trace.Reject
			return true, nil
		}
	}
	return false, nil
}

func (r *run) baseChains(hook knftables.BaseChainHook) ([]baseChain, error) {
	var out []baseChain
	for _, tbl := range r.tables {
		for _, name := range sortedKeys(tbl.t.Chains) {
			ch := tbl.t.Chains[name]
			if ch.Hook == nil || *ch.Hook != hook {
				continue
			}
			prio := 0
			if ch.Priority != nil {
				p, err := knftables.ParsePriority(tbl.family, string(*ch.Priority))
				if err != nil {
					return nil, fmt.Errorf("%s: %w", tbl.chainName(name), err)
				}
				prio = p
			}
			out = append(out, baseChain{tbl: tbl, chain: ch, priority: prio})
		}
	}
	// Equal priorities run in registration order in the kernel, which a Fake does
	// not record; order by name so traces are at least deterministic.
	sort.SliceStable(out, func(i, j int) bool { return out[i].priority < out[j].priority })
	return out, nil
}

func (r *run) note(s string) {
	r.out.Trace = append(r.out.Trace, s)
}

// choose returns the next random choice among n alternatives: replayed from the
// prefix being explored, or 0 for a choice point not seen before.
func (r *run) choose(n int) int {
	r.out.Probability /= float64(n) // numgen random picks each alternative alike
	return r.choices.Choose(n)
}
