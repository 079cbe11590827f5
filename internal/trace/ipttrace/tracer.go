package ipttrace

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/trace"
)

// Tracer traces packets through one family's iptables rules. It is immutable once
// built, so it is safe for concurrent use.
type Tracer struct {
	v6     bool
	local  map[netip.Addr]bool
	tables map[string]*table
	recent map[string][]netip.Addr // -m recent lists, by name
	sets   map[string]*ipSet       // -m set sets, by name (WithSets)
	// bridged are the interfaces whose packets -m physdev sees as bridged
	// (WithBridged).
	bridged map[string]bool
	// balancer is IPVS between the tables (WithBalancer); nil: none.
	balancer Balancer
}

// table is one table of the save.
type table struct {
	name   string
	chains map[string]*chain
}

// chain is a declared chain with its parsed rules.
type chain struct {
	name   string
	policy string // ACCEPT or DROP for a built-in chain, "-" for a user chain
	rules  []*rule
}

// New parses iptables-save output (all tables of one family: raw, mangle, nat,
// filter, security, as present) and returns a Tracer. localAddresses are the node's
// own addresses (what "-m addrtype --dst-type LOCAL" matches, and what decides
// INPUT vs FORWARD); those of the other family are ignored, so one list serves both
// families' tracers; loopback addresses are always local. Every rule is parsed here:
// New fails, naming the rule, on anything the tracer does not understand, and on
// jumps to chains that do not exist.
func New(save []byte, v6 bool, localAddresses []netip.Addr) (*Tracer, error) {
	s, err := iptables.ParseSave(save)
	if err != nil {
		return nil, err
	}
	t := &Tracer{v6: v6, local: map[netip.Addr]bool{}, tables: map[string]*table{}, recent: map[string][]netip.Addr{}}
	for _, a := range localAddresses {
		if !a.IsValid() {
			return nil, errors.New("invalid local address")
		}
		// A dual-stack node's other addresses cannot be in these rules' packets.
		if a = a.Unmap(); a.Is6() == v6 {
			t.local[a] = true
		}
	}
	for _, st := range s.Tables {
		tbl, err := t.loadTable(st)
		if err != nil {
			return nil, err
		}
		t.tables[tbl.name] = tbl
	}
	return t, nil
}

func (t *Tracer) loadTable(st iptables.SaveTable) (*table, error) {
	name := string(st.Name)
	hooks, ok := tableHooks[name]
	if !ok {
		return nil, fmt.Errorf("table %q is not supported", name)
	}
	tbl := &table{name: name, chains: map[string]*chain{}}
	for _, c := range st.Chains {
		builtin := slices.Contains(hooks, string(c.Name))
		switch {
		case builtin && c.Policy != "ACCEPT" && c.Policy != "DROP":
			return nil, fmt.Errorf("table %s: built-in chain %s has policy %q", name, c.Name, c.Policy)
		case !builtin && c.Policy != "-":
			return nil, fmt.Errorf("table %s: chain %s is not a built-in chain of the table but has policy %q", name, c.Name, c.Policy)
		}
		tbl.chains[string(c.Name)] = &chain{name: string(c.Name), policy: c.Policy}
	}
	for _, sr := range st.Rules {
		r, err := parseRule(t.v6, name, string(sr.Chain), sr.Line, sr.Text, sr.Args)
		if err == nil && r.target.kind == tJump && tbl.chains[r.target.chain] == nil {
			err = fmt.Errorf("no chain %s in table %s (unknown target?)", r.target.chain, name)
		}
		if err == nil && r.target.kind == tJump && tbl.chains[r.target.chain].policy != "-" {
			err = fmt.Errorf("jump to built-in chain %s", r.target.chain)
		}
		if err != nil {
			return nil, &ruleError{table: name, chain: string(sr.Chain), line: sr.Line, text: sr.Text, err: err}
		}
		c := tbl.chains[string(sr.Chain)]
		c.rules = append(c.rules, r)
	}
	return tbl, nil
}

// WithRecent returns a copy of the Tracer whose "-m recent" list name holds addrs
// (as ClientIP session affinity records a client). Lists are otherwise empty: a
// trace never learns from "--set".
func (t *Tracer) WithRecent(name string, addrs ...netip.Addr) *Tracer {
	c := *t
	c.recent = maps.Clone(t.recent)
	c.recent[name] = append(slices.Clone(t.recent[name]), addrs...)
	return &c
}

// WithBridged returns a copy of the Tracer where packets arriving on the bridges
// named come in through a bridge port, as br_netfilter (bridge-nf-call-iptables)
// shows them to iptables: "-m physdev --physdev-is-in" matches them. Without it
// no packet does.
func (t *Tracer) WithBridged(names ...string) *Tracer {
	c := *t
	c.bridged = maps.Clone(t.bridged)
	if c.bridged == nil {
		c.bridged = map[string]bool{}
	}
	for _, n := range names {
		c.bridged[n] = true
	}
	return &c
}

// Trace runs p through the rules and returns every possible outcome (one per
// combination of random choices, each with its probability). An error means the
// packet description is invalid or of the other family, or a rule reached was used
// where the kernel would not allow it (the error names it).
func (t *Tracer) Trace(p trace.Packet) (*trace.Result, error) {
	pkt, err := newPacketState(p, t.v6)
	if err != nil {
		return nil, err
	}
	return trace.Explore(func(ch *trace.Choices) (trace.Outcome, error) {
		r := &run{tr: t, pkt: pkt, choices: ch, natDone: map[string]bool{}}
		r.out.Probability = 1
		err := r.walk()
		r.out.Mark = r.pkt.mark
		return r.out, err
	})
}

func (t *Tracer) isLocal(a netip.Addr) bool {
	return a.IsLoopback() || t.local[a]
}

// addrType is the address type -m addrtype sees.
func (t *Tracer) addrType(a netip.Addr) string {
	switch {
	case t.isLocal(a):
		return "LOCAL"
	case a.IsMulticast():
		return "MULTICAST"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "BROADCAST"
	}
	return "UNICAST"
}

// ruleError is an error located at a rule. It is not re-wrapped by the chains that
// jumped to the rule's chain, so the message names exactly the offending rule.
type ruleError struct {
	table, chain string
	line         int
	text         string
	err          error
}

func newRuleError(table string, r *rule, err error) error {
	var re *ruleError
	if errors.As(err, &re) {
		return err
	}
	return &ruleError{table: table, chain: r.chain, line: r.line, text: r.text, err: err}
}

func (e *ruleError) Error() string {
	return fmt.Sprintf("table %s, line %d: rule `-A %s %s`: %v", e.table, e.line, e.chain, e.text, e.err)
}

func (e *ruleError) Unwrap() error { return e.err }
