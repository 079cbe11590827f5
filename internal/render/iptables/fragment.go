package iptables

import (
	"cmp"
	"slices"
	"strings"
)

// Fragment is a plain description of part of kproxy's rules: the chains it owns
// (declared and rewritten whole) and the rules it puts into the shared chains
// (KUBE-SERVICES, KUBE-NODEPORTS, KUBE-EXTERNAL-SERVICES, KUBE-PROXY-FIREWALL).
//
// The base fragment (RenderBase) owns the shared chains; their Rules are "tail"
// rules that stay after every entry (the jump to KUBE-NODEPORTS is the last rule of
// nat KUBE-SERVICES). A ServicePort's fragment (RenderService) owns its KUBE-SVC-,
// KUBE-SVL-, KUBE-EXT-, KUBE-FW- and KUBE-SEP- chains and has Entries in the shared
// chains. Fragments are never mutated after rendering; rendering the same input
// twice gives Equal fragments.
type Fragment struct {
	// Chains are sorted by table and name.
	Chains []Chain
	// Entries are in upstream's order for one ServicePort.
	Entries []Entry
}

// Chain is a chain owned by a fragment with its rules in order. Each rule is the
// text after "-A NAME", exactly as iptables-save prints it.
type Chain struct {
	Table Table
	Name  string
	Rules []string
}

// Entry is one rule a fragment puts into a shared chain.
type Entry struct {
	Table Table
	Chain string
	Rule  string
}

// chainID identifies a chain: names are per table.
type chainID struct {
	table Table
	name  string
}

func (c *Chain) id() chainID { return chainID{c.Table, c.Name} }

// Equal reports whether f and g describe the same rules.
func (f *Fragment) Equal(g *Fragment) bool {
	if f == nil || g == nil {
		return f == g
	}
	return slices.EqualFunc(f.Chains, g.Chains, func(a, b Chain) bool { return equalChain(&a, &b) }) &&
		slices.Equal(f.Entries, g.Entries)
}

func equalChain(a, b *Chain) bool {
	return a.Table == b.Table && a.Name == b.Name && slices.Equal(a.Rules, b.Rules)
}

// rules counts the rules of f in table: its chains' rules and its entries.
func (f *Fragment) rules(table Table) int {
	n := 0
	for i := range f.Chains {
		if f.Chains[i].Table == table {
			n += len(f.Chains[i].Rules)
		}
	}
	for i := range f.Entries {
		if f.Entries[i].Table == table {
			n++
		}
	}
	return n
}

func sortChains(chains []Chain) {
	slices.SortFunc(chains, func(a, b Chain) int {
		return cmp.Or(strings.Compare(string(a.Table), string(b.Table)), strings.Compare(a.Name, b.Name))
	})
}
