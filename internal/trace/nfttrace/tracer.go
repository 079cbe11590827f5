package nfttrace

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/nft/nfttext"
	"github.com/kproxy/kproxy/internal/trace"
)

// Tracer traces packets through the ruleset currently held by a knftables.Fake. It
// reads the Fake at each Trace call, so it can be reused across transactions. It is
// safe for concurrent use.
type Tracer struct {
	nft   *knftables.Fake
	local map[netip.Addr]bool

	mu    sync.Mutex
	cache map[string]*parsedRule // parsed rules by rule text
}

// New returns a Tracer for nft. localAddresses are the node's own addresses (what
// "fib daddr type local" matches, and what decides input vs forward); loopback
// addresses are always local.
func New(nft *knftables.Fake, localAddresses []string) (*Tracer, error) {
	t := &Tracer{nft: nft, local: map[netip.Addr]bool{}, cache: map[string]*parsedRule{}}
	for _, s := range localAddresses {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("bad local address %q: %w", s, err)
		}
		t.local[a.Unmap()] = true
	}
	return t, nil
}

// Trace is a shorthand for New(nft, localAddresses) followed by Trace(p).
func Trace(nft *knftables.Fake, localAddresses []string, p trace.Packet) (*trace.Result, error) {
	t, err := New(nft, localAddresses)
	if err != nil {
		return nil, err
	}
	return t.Trace(p)
}

// Trace runs p through the ruleset and returns every possible outcome. An error means
// the packet description is invalid, or a rule, set or map the packet reached could
// not be understood (the error names it).
func (t *Tracer) Trace(p trace.Packet) (*trace.Result, error) {
	pkt, err := newPacketState(p)
	if err != nil {
		return nil, err
	}
	t.nft.RLock()
	defer t.nft.RUnlock()
	tables := t.tablesFor(pkt.v6)

	return trace.Explore(func(ch *trace.Choices) (trace.Outcome, error) {
		r := &run{tr: t, tables: tables, pkt: pkt.clone(), choices: ch, natDone: map[string]bool{}}
		r.out.Mark = pkt.mark
		r.out.Probability = 1
		err := r.walk()
		r.out.Mark = r.pkt.mark
		return r.out, err
	})
}

// Validate parses every rule of every table, and every element of every set and map
// that some rule looks up, reporting the first thing the tracer does not understand.
// Renderer tests can call it to fail on unsupported syntax even in chains no traced
// packet reaches.
func (t *Tracer) Validate() error {
	t.nft.RLock()
	defer t.nft.RUnlock()
	for _, tbl := range t.allTables() {
		for _, name := range sortedKeys(tbl.t.Chains) {
			for _, rule := range tbl.t.Chains[name].Rules {
				pr, err := t.parse(tbl, name, rule.Rule)
				if err != nil {
					return err
				}
				if err := validateRuleRefs(tbl, name, pr); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (t *Tracer) parse(tbl tableRef, chain, text string) (*parsedRule, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if pr, ok := t.cache[text]; ok {
		return pr, nil
	}
	r, err := nfttext.ParseRule(text)
	if err == nil {
		err = checkRule(r)
	}
	if err != nil {
		return nil, newRuleError(tbl, chain, text, err)
	}
	pr := &parsedRule{text: text, Rule: r}
	t.cache[text] = pr
	return pr, nil
}

// tableRef is a table together with its family.
type tableRef struct {
	family knftables.Family
	name   string
	t      *knftables.FakeTable
}

func (tbl tableRef) chainName(chain string) string {
	return fmt.Sprintf("chain %s %s %s", tbl.family, tbl.name, chain)
}

func (t *Tracer) allTables() []tableRef {
	var out []tableRef
	for _, fam := range sortedKeys(t.nft.Tables) {
		for _, name := range sortedKeys(t.nft.Tables[fam]) {
			out = append(out, tableRef{family: fam, name: name, t: t.nft.Tables[fam][name]})
		}
	}
	return out
}

// tablesFor returns the tables whose base chains see packets of the given IP family.
func (t *Tracer) tablesFor(v6 bool) []tableRef {
	var out []tableRef
	for _, tbl := range t.allTables() {
		switch tbl.family {
		case knftables.InetFamily:
		case knftables.IPv4Family:
			if v6 {
				continue
			}
		case knftables.IPv6Family:
			if !v6 {
				continue
			}
		default:
			continue
		}
		out = append(out, tbl)
	}
	return out
}

func (t *Tracer) isLocal(a netip.Addr) bool {
	return a.IsLoopback() || t.local[a]
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

// ruleError is an error located at a rule. It is not re-wrapped by the chains that
// jumped to the rule's chain, so the message names exactly the offending rule.
type ruleError struct {
	msg string
	err error
}

func newRuleError(tbl tableRef, chain, text string, err error) error {
	var re *ruleError
	if errors.As(err, &re) {
		return err
	}
	return &ruleError{msg: fmt.Sprintf("%s: rule `%s`", tbl.chainName(chain), text), err: err}
}

func (e *ruleError) Error() string { return e.msg + ": " + e.err.Error() }
func (e *ruleError) Unwrap() error { return e.err }
