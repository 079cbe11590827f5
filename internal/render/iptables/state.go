package iptables

import (
	"bytes"
	"cmp"
	"slices"
	"strings"

	"github.com/kproxy/kproxy/internal/model"
)

// State is what the kernel holds of kproxy's rules as last applied: the base
// fragment, one fragment per ServicePort, and the position of every entry in its
// shared chain. A State is not safe for concurrent use; Plan only reads it, Commit
// mutates it.
type State struct {
	base     *Fragment
	services map[model.ServicePortName]*Fragment
	// entries holds, for every rule of a shared chain, the kernel positions of its
	// copies, ascending (identical rules may coexist: "-D" removes the first one).
	// Positions only order rules within a chain: a full sync numbers entries from
	// 0 up, and "-I CHAIN 1" gives a number below every other.
	entries map[Entry][]int64
	top     int64
	// chains counts the fragments declaring each per-ServicePort chain.
	chains map[chainID]int
	// rules counts the rules of each table in kproxy's chains.
	rules map[Table]int
}

// Written summarizes one restore input.
type Written struct {
	// Rules counts the rules written ("-A" and "-I" lines) per table.
	Rules map[Table]int
	// DeletedChains counts the chains deleted ("-X" lines).
	DeletedChains int
}

// NewState builds the State describing exactly base plus services, as WriteFull
// programs it. The maps and fragments are kept, not copied: do not mutate them.
func NewState(base *Fragment, services map[model.ServicePortName]*Fragment) *State {
	s := &State{
		base:     base,
		services: services,
		entries:  make(map[Entry][]int64),
		chains:   make(map[chainID]int),
		rules:    make(map[Table]int),
	}
	if s.services == nil {
		s.services = make(map[model.ServicePortName]*Fragment)
	}
	s.count(base, 1)
	var pos int64
	for _, name := range s.sortedNames() {
		f := s.services[name]
		s.count(f, 1)
		s.indexChains(f, 1)
		for _, e := range f.Entries {
			s.entries[e] = append(s.entries[e], pos)
			pos++
		}
	}
	return s
}

func (s *State) count(f *Fragment, sign int) {
	if f == nil {
		return
	}
	for _, t := range tables {
		s.rules[t] += sign * f.rules(t)
	}
}

func (s *State) indexChains(f *Fragment, delta int) {
	if f == nil {
		return
	}
	for i := range f.Chains {
		id := f.Chains[i].id()
		if n := s.chains[id] + delta; n == 0 {
			delete(s.chains, id)
		} else {
			s.chains[id] = n
		}
	}
}

func (s *State) sortedNames() []model.ServicePortName {
	names := make([]model.ServicePortName, 0, len(s.services))
	for n := range s.services {
		names = append(names, n)
	}
	slices.SortFunc(names, model.CompareServicePortNames)
	return names
}

// Base returns the applied base fragment.
func (s *State) Base() *Fragment { return s.base }

// Service returns the applied fragment of a ServicePort (nil when absent).
func (s *State) Service(name model.ServicePortName) *Fragment { return s.services[name] }

// Len returns the number of ServicePorts in the state.
func (s *State) Len() int { return len(s.services) }

// Rules returns the number of rules of kproxy's chains in table (for
// kubeproxy_sync_proxy_rules_iptables_total).
func (s *State) Rules(table Table) int { return s.rules[table] }

// Chains returns the names of the per-ServicePort chains of table, sorted.
func (s *State) Chains(table Table) []string {
	var out []string
	for id := range s.chains {
		if id.table == table {
			out = append(out, id.name)
		}
	}
	slices.Sort(out)
	return out
}

// HasChain reports whether a ServicePort's fragment declares the chain.
func (s *State) HasChain(table Table, name string) bool { return s.chains[chainID{table, name}] > 0 }

// WriteFull writes into buf the iptables-restore input (for --noflush) that replaces
// kproxy's chains with the content of s: every base chain and every per-ServicePort
// chain is declared (which creates or flushes it) and written whole, and the chains
// of nat table named in existing (typically iptables.ChainsInSave of the nat table's current
// rules, plus the chains of the previously applied State) that are per-ServicePort
// chains (IsServiceChain) no fragment of s declares are flushed and deleted. Chains
// of other software are never touched.
func WriteFull(buf *bytes.Buffer, s *State, existing []string) Written {
	w := Written{Rules: make(map[Table]int)}
	names := s.sortedNames()
	var stale []string
	for _, name := range existing {
		if IsServiceChain(name) && !s.HasChain(TableNAT, name) {
			stale = append(stale, name)
		}
	}
	slices.Sort(stale)
	stale = slices.Compact(stale)

	for _, table := range tables {
		buf.WriteString("*" + string(table) + "\n")
		if s.base != nil {
			for i := range s.base.Chains {
				if c := &s.base.Chains[i]; c.Table == table {
					declare(buf, c.Name)
				}
			}
		}
		for _, name := range names {
			f := s.services[name]
			for i := range f.Chains {
				if c := &f.Chains[i]; c.Table == table {
					declare(buf, c.Name)
				}
			}
		}
		if table == TableNAT {
			for _, name := range stale {
				declare(buf, name)
			}
		}
		for _, name := range names {
			f := s.services[name]
			for i := range f.Entries {
				if e := &f.Entries[i]; e.Table == table {
					appendRule(buf, e.Chain, e.Rule)
					w.Rules[table]++
				}
			}
			for i := range f.Chains {
				if c := &f.Chains[i]; c.Table == table {
					for _, r := range c.Rules {
						appendRule(buf, c.Name, r)
					}
					w.Rules[table] += len(c.Rules)
				}
			}
		}
		// Tail rules last: the jump to KUBE-NODEPORTS ends nat KUBE-SERVICES.
		if s.base != nil {
			for i := range s.base.Chains {
				if c := &s.base.Chains[i]; c.Table == table {
					for _, r := range c.Rules {
						appendRule(buf, c.Name, r)
					}
					w.Rules[table] += len(c.Rules)
				}
			}
		}
		if table == TableNAT {
			for _, name := range stale {
				buf.WriteString("-X " + name + "\n")
			}
			w.DeletedChains = len(stale)
		}
		buf.WriteString("COMMIT\n")
	}
	return w
}

func declare(buf *bytes.Buffer, chain string) {
	buf.WriteString(":" + chain + " - [0:0]\n")
}

func appendRule(buf *bytes.Buffer, chain, rule string) {
	buf.WriteString("-A " + chain)
	if rule != "" {
		buf.WriteByte(' ')
		buf.WriteString(rule)
	}
	buf.WriteByte('\n')
}

// Dump renders kproxy's chains as "iptables-save -t TABLE" prints them, for each
// table in turn (filter, then nat): the chain declarations sorted by name, then the
// rules chain by chain in kernel order, without counters or comment lines. Tests
// compare it with the kernel's and the Fake's rules.
func (s *State) Dump() string {
	var b strings.Builder
	for _, table := range tables {
		b.WriteString(s.DumpTable(table))
	}
	return b.String()
}

// DumpTable is Dump for one table.
func (s *State) DumpTable(table Table) string {
	chains, rules := s.ChainRules(table)
	var b strings.Builder
	b.WriteString("*" + string(table) + "\n")
	for _, c := range chains {
		b.WriteString(":" + c + " - [0:0]\n")
	}
	for _, c := range chains {
		for _, r := range rules[c] {
			b.WriteString("-A " + c)
			if r != "" {
				b.WriteString(" " + r)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// ChainRules returns kproxy's chains of table, sorted by name, and the rules of
// each in kernel order, as iptables-save prints them after "-A CHAIN ": what the
// kernel holds when nobody else changed it (Dump; drift detection compares it
// with iptables-save).
func (s *State) ChainRules(table Table) (chains []string, rules map[string][]string) {
	rules = map[string][]string{}
	add := func(c *Chain) {
		if _, ok := rules[c.Name]; !ok {
			chains = append(chains, c.Name)
		}
		rules[c.Name] = append(rules[c.Name], c.Rules...)
	}
	for _, f := range s.services {
		for i := range f.Chains {
			if f.Chains[i].Table == table {
				add(&f.Chains[i])
			}
		}
	}
	// Entries in kernel order, then the base chains' tail rules.
	type positioned struct {
		pos   int64
		entry Entry
	}
	var entries []positioned
	for e, positions := range s.entries {
		if e.Table == table {
			for _, p := range positions {
				entries = append(entries, positioned{p, e})
			}
		}
	}
	slices.SortFunc(entries, func(a, b positioned) int {
		return cmp.Or(cmp.Compare(a.pos, b.pos), strings.Compare(a.entry.Chain, b.entry.Chain), strings.Compare(a.entry.Rule, b.entry.Rule))
	})
	for _, e := range entries {
		if _, ok := rules[e.entry.Chain]; !ok {
			chains = append(chains, e.entry.Chain)
		}
		rules[e.entry.Chain] = append(rules[e.entry.Chain], e.entry.Rule)
	}
	if s.base != nil {
		for i := range s.base.Chains {
			if s.base.Chains[i].Table == table {
				add(&s.base.Chains[i])
			}
		}
	}
	slices.Sort(chains)
	return chains, rules
}
