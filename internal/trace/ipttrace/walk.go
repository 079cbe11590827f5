package ipttrace

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/kproxy/kproxy/internal/trace"
)

// tableHooks are the built-in chains of each table.
var tableHooks = map[string][]string{
	"raw":      {"PREROUTING", "OUTPUT"},
	"mangle":   {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
	"nat":      {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	"filter":   {"INPUT", "FORWARD", "OUTPUT"},
	"security": {"INPUT", "FORWARD", "OUTPUT"},
}

// hookTable is a table attached to a hook, with its netfilter priority.
type hookTable struct {
	table    string
	priority int
}

// hookOrder is the order in which the kernel runs the tables at each hook
// (NF_IP_PRI_RAW -300, conntrack -200, MANGLE -150, NAT_DST -100, FILTER 0,
// SECURITY 50, NAT_SRC 100).
var hookOrder = map[string][]hookTable{
	"PREROUTING":  {{"raw", -300}, {"mangle", -150}, {"nat", -100}},
	"INPUT":       {{"mangle", -150}, {"filter", 0}, {"security", 50}, {"nat", 100}},
	"FORWARD":     {{"mangle", -150}, {"filter", 0}, {"security", 50}},
	"OUTPUT":      {{"raw", -300}, {"mangle", -150}, {"nat", -100}, {"filter", 0}, {"security", 50}},
	"POSTROUTING": {{"mangle", -150}, {"nat", 100}},
}

// maxJumpDepth stops a jump loop (the kernel refuses to load one, so reaching it
// means the save is not from a kernel).
const maxJumpDepth = 256

// run is one traced path of a packet (one sequence of random choices).
type run struct {
	tr  *Tracer
	pkt pktState
	out trace.Outcome

	choices    *trace.Choices // the random choices of this path
	lastChance float64        // probability of the branch the last choice took

	pending []string // notes about the current rule, shown after it if it matches
	skipped string   // why the current rule did not match, when by random choice

	natDone   map[string]bool // NAT manip types ("dst"/"src") already bound
	skipNAT   bool            // loopback re-entry: the connection's NAT is already decided
	confirmed bool            // the connection went through POSTROUTING or INPUT

	ipvsHandled bool // IPVS DNATed the packet (the skb's ipvs_property)
	stolen      bool // IPVS took the packet out of the hook to send it itself

	hook, table string // the built-in chain being run
}

type chainVerdict int

const (
	vNone   chainVerdict = iota // fell off the end or returned
	vAccept                     // accepted (ends this table's built-in chain only)
	vDrop
	vReject
)

// walk sends the packet along its path, stopping at the first drop or reject.
func (r *run) walk() error {
	r.out.Verdict = trace.Accept
	if r.pkt.locallyGenerated {
		r.pkt.iif = ""
		r.routeOutput()
		for _, hook := range []string{"OUTPUT", "POSTROUTING"} {
			if done, err := r.step(hook); done || err != nil {
				return err
			}
			r.routeOutput() // a DNAT in OUTPUT re-routes the packet
		}
		if !r.tr.isLocal(r.pkt.dst) {
			return nil
		}
		// Delivered over loopback: it re-enters at PREROUTING, then INPUT.
		r.skipNAT = true
		r.pkt.iif, r.pkt.oif = "lo", ""
		for _, hook := range []string{"PREROUTING", "INPUT"} {
			if done, err := r.step(hook); done || err != nil {
				return err
			}
		}
		return nil
	}

	// The output interface is known only once routed: "-o" sees no name in
	// PREROUTING and INPUT.
	oif := r.pkt.oif
	r.pkt.oif = ""
	if done, err := r.step("PREROUTING"); done || err != nil {
		return err
	}
	hooks := []string{"FORWARD", "POSTROUTING"}
	if r.tr.isLocal(r.pkt.dst) {
		hooks = []string{"INPUT"}
	} else {
		r.pkt.oif = oif
	}
	for _, hook := range hooks {
		if done, err := r.step(hook); done || err != nil {
			return err
		}
	}
	return nil
}

// step runs one hook of the packet's path. A packet IPVS took there (to a real
// server elsewhere) goes on from LOCAL_OUT, and the path ends with it.
func (r *run) step(hook string) (bool, error) {
	done, err := r.runHook(hook)
	if err == nil && r.stolen {
		r.stolen = false
		return true, r.reinject()
	}
	return done, err
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

// natManip is the kind of NAT binding the nat table makes at a hook.
func natManip(hook string) string {
	if hook == "PREROUTING" || hook == "OUTPUT" {
		return "dst"
	}
	return "src"
}

// runHook runs the built-in chains of one hook in table order (and IPVS, with a
// Balancer). It returns true when the packet goes no further in the hook: dropped,
// rejected, or taken by IPVS to be sent on (r.stolen).
func (r *run) runHook(hook string) (bool, error) {
	for _, ht := range r.tr.hookTables(hook) {
		if ht.table == ipvsTable {
			if stop, err := r.balance(hook, ht.priority); stop || err != nil {
				return stop, err
			}
			continue
		}
		tbl := r.tr.tables[ht.table]
		if tbl == nil || tbl.chains[hook] == nil {
			continue
		}
		if ht.table == "nat" {
			// The kernel consults nat chains only for the first packet of a
			// connection, and only until a binding is made for that manip type.
			if r.skipNAT || r.pkt.ctState != "new" || r.natDone[natManip(hook)] {
				continue
			}
		}
		r.hook, r.table = hook, ht.table
		c := tbl.chains[hook]
		r.note(fmt.Sprintf("%s %s (hook %s, priority %d, policy %s)", ht.table, hook, strings.ToLower(hook), ht.priority, c.policy))
		v, err := r.runChain(tbl, hook, 0)
		if err != nil {
			return false, err
		}
		if ht.table == "nat" {
			// Without a binding the kernel makes a null one: the manip type is
			// decided for the connection (nf_nat_alloc_null_binding).
			r.natDone[natManip(hook)] = true
		}
		if v == vNone && c.policy == "DROP" {
			r.note("  policy DROP")
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
	if hook == "POSTROUTING" || hook == "INPUT" {
		r.confirmed = true // conntrack confirms the connection as the packet leaves these hooks
	}
	return false, nil
}

func (r *run) runChain(tbl *table, name string, depth int) (chainVerdict, error) {
	if depth > maxJumpDepth {
		return vNone, fmt.Errorf("table %s: chain %s: jump depth exceeds %d (loop?)", tbl.name, name, maxJumpDepth)
	}
	for _, rl := range tbl.chains[name].rules {
		v, done, err := r.evalRule(tbl, rl, depth)
		if err != nil {
			return vNone, newRuleError(tbl.name, rl, err)
		}
		if done {
			return v, nil
		}
	}
	return vNone, nil
}

// evalRule runs one rule: its matches in order, then its target. done says the
// chain ends here, with verdict v (vNone: RETURN, or back from a goto).
func (r *run) evalRule(tbl *table, rl *rule, depth int) (chainVerdict, bool, error) {
	r.pending, r.skipped = nil, ""
	for _, m := range rl.matches {
		ok, err := m.match(r)
		if err != nil {
			return vNone, false, err
		}
		if !ok {
			if r.skipped != "" {
				r.note(fmt.Sprintf("  [%s] not taken, %s: %s", rl.chain, r.skipped, rl.text))
			}
			return vNone, false, nil
		}
	}
	r.note(fmt.Sprintf("  [%s] %s", rl.chain, rl.text))
	r.out.Trace = append(r.out.Trace, r.pending...)
	r.pending = nil
	return r.exec(tbl, rl.target, depth)
}

// exec runs a matched rule's target.
func (r *run) exec(tbl *table, t target, depth int) (chainVerdict, bool, error) {
	switch t.kind {
	case tNone, tNoop:
		return vNone, false, nil
	case tAccept:
		return vAccept, true, nil
	case tDrop:
		return vDrop, true, nil
	case tReject:
		if err := r.checkHook("REJECT", "INPUT", "FORWARD", "OUTPUT"); err != nil {
			return vNone, false, err
		}
		return vReject, true, nil
	case tReturn:
		return vNone, true, nil
	case tJump:
		v, err := r.runChain(tbl, t.chain, depth+1)
		if err != nil || v != vNone {
			return v, true, err
		}
		// A goto does not come back: when its chain ends, so does this one.
		return vNone, t.goTo, nil
	case tMark:
		old := r.pkt.mark
		r.pkt.mark = old&t.and ^ t.xor
		r.note(fmt.Sprintf("    mark %#x -> %#x", old, r.pkt.mark))
		return vNone, false, nil
	case tNotrack:
		r.pkt.ctState = "untracked"
		r.note("    untracked: conntrack and nat ignore the packet")
		return vNone, false, nil
	case tDNAT, tSNAT:
		return r.execNAT(t)
	case tMasquerade:
		if err := r.checkHook("MASQUERADE", "POSTROUTING"); err != nil {
			return vNone, false, err
		}
		r.out.Masquerade = true
		r.natDone["src"] = true
		r.pkt.snat = true
		return vAccept, true, nil
	}
	return vNone, false, fmt.Errorf("internal error: unhandled target %q", t.name)
}

func (r *run) execNAT(t target) (chainVerdict, bool, error) {
	var err error
	if t.kind == tDNAT {
		err = r.checkHook("DNAT", "PREROUTING", "OUTPUT")
	} else {
		err = r.checkHook("SNAT", "POSTROUTING", "INPUT")
	}
	if err != nil {
		return vNone, false, err
	}
	to := t.addr.String()
	if t.hasPort {
		to = netip.AddrPortFrom(t.addr, t.port).String()
	}
	if t.kind == tDNAT {
		r.pkt.dst, r.pkt.dnat, r.natDone["dst"] = t.addr, true, true
		if t.hasPort {
			r.pkt.dport = t.port
		}
		r.out.DNAT = to
	} else {
		r.pkt.src, r.pkt.snat, r.natDone["src"] = t.addr, true, true
		if t.hasPort {
			r.pkt.sport = t.port
		}
		r.out.SNAT = to
	}
	return vAccept, true, nil
}

// checkHook fails where the kernel would have refused to load the ruleset: a target
// reached from a hook it cannot be used at.
func (r *run) checkHook(what string, hooks ...string) error {
	for _, h := range hooks {
		if h == r.hook {
			return nil
		}
	}
	return fmt.Errorf("%s reached from %s %s (allowed from: %s)", what, r.table, r.hook, strings.Join(hooks, ", "))
}

func (r *run) note(s string) {
	r.out.Trace = append(r.out.Trace, s)
}

// chance makes a random choice that succeeds with probability p: replayed from the
// prefix being explored, or success for a choice point not seen before. Certain
// outcomes (p 0 or 1) are not choice points.
func (r *run) chance(p float64) bool {
	if p >= 1 || p <= 0 {
		r.lastChance = 1
		return p >= 1
	}
	c := r.choices.Choose(2)
	r.lastChance = p
	if c == 1 {
		r.lastChance = 1 - p
	}
	r.out.Probability *= r.lastChance
	return c == 0
}
