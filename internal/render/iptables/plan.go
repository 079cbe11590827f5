package iptables

import (
	"bytes"
	"cmp"
	"slices"
	"strings"

	"github.com/kproxy/kproxy/internal/model"
)

// Plan is a delta written into a restore input, to Commit into the State once the
// restore succeeded. If it failed, discard the Plan and resynchronize with WriteFull.
type Plan struct {
	base    *Fragment
	baseSet bool
	updates map[model.ServicePortName]*Fragment
	// removed and inserted are the entry copies deleted ("-D", in order) and
	// inserted ("-I CHAIN 1", in the order of the lines).
	removed, inserted []Entry
	// Written summarizes the delta. The restore input is empty (nothing to run)
	// when nothing changes.
	Written Written
}

// tableDelta collects the lines of one table, in the order they must run.
type tableDelta struct {
	declare, del, rewrite, insert, tails, remove bytes.Buffer
}

func (d *tableDelta) empty() bool {
	return d.declare.Len()+d.del.Len()+d.rewrite.Len()+d.insert.Len()+d.tails.Len()+d.remove.Len() == 0
}

// Plan writes into buf the restore input (for --noflush) turning the applied state
// into the state where base replaces the base fragment (nil: unchanged) and each
// entry of updates replaces its ServicePort's fragment (a nil fragment removes the
// ServicePort). Unchanged fragments cost nothing; pass only what changed. Nothing is
// written when nothing changes, and a table without changes is left out (the legacy
// backend rewrites a whole table for each table in the input).
//
// Per table, in this order: declarations of new, changed and removed chains (which
// creates them or flushes them), "-D" of the entries and tail rules that go, the
// rules of the new and changed chains, "-I CHAIN 1" of the new entries (so the tail
// rules of the shared chains stay last), the new tail rules, and "-X" of the removed
// chains, when nothing references them any more.
func (s *State) Plan(buf *bytes.Buffer, base *Fragment, updates map[model.ServicePortName]*Fragment) *Plan {
	p := &Plan{updates: updates, Written: Written{Rules: make(map[Table]int)}}
	deltas := map[Table]*tableDelta{}
	delta := func(t Table) *tableDelta {
		d := deltas[t]
		if d == nil {
			d = &tableDelta{}
			deltas[t] = d
		}
		return d
	}

	if base != nil && base != s.base {
		p.base, p.baseSet = base, true
		s.planBase(p, base, delta)
	}

	names := make([]model.ServicePortName, 0, len(updates))
	for n, f := range updates {
		if s.services[n] != f {
			names = append(names, n)
		}
	}
	slices.SortFunc(names, model.CompareServicePortNames)

	oldChains := map[chainID]*Chain{}
	newChains := map[chainID]*Chain{}
	var chainOrder []chainID
	// Entry copies to add (positive) or remove (negative), in first-seen order.
	entryDelta := map[Entry]int{}
	var entryOrder []Entry
	note := func(e Entry, d int) {
		if _, ok := entryDelta[e]; !ok {
			entryOrder = append(entryOrder, e)
		}
		entryDelta[e] += d
	}
	for _, n := range names {
		old, nw := s.services[n], updates[n]
		if old != nil {
			for i := range old.Chains {
				c := &old.Chains[i]
				oldChains[c.id()] = c
				chainOrder = append(chainOrder, c.id())
			}
			for _, e := range old.Entries {
				note(e, -1)
			}
		}
		if nw != nil {
			for i := range nw.Chains {
				c := &nw.Chains[i]
				newChains[c.id()] = c
				chainOrder = append(chainOrder, c.id())
			}
			for _, e := range nw.Entries {
				note(e, 1)
			}
		}
	}
	slices.SortFunc(chainOrder, compareChainIDs)
	chainOrder = slices.Compact(chainOrder)

	for _, id := range chainOrder {
		o, n := oldChains[id], newChains[id]
		d := delta(id.table)
		switch {
		case n == nil:
			// Flushed now, deleted last: its rules may jump to other removed chains.
			declare(&d.declare, id.name)
			d.remove.WriteString("-X " + id.name + "\n")
			p.Written.DeletedChains++
		case o == nil || !equalChain(o, n):
			declare(&d.declare, id.name)
			for _, r := range n.Rules {
				appendRule(&d.rewrite, id.name, r)
			}
			p.Written.Rules[id.table] += len(n.Rules)
		}
	}

	var inserts []Entry
	for _, e := range entryOrder {
		n := entryDelta[e]
		for ; n < 0; n++ {
			delta(e.Table).del.WriteString("-D " + e.Chain + " " + e.Rule + "\n")
			p.removed = append(p.removed, e)
		}
		for ; n > 0; n-- {
			inserts = append(inserts, e)
		}
	}
	// Inserted at the top in reverse, so that they end up in render order.
	for i := len(inserts) - 1; i >= 0; i-- {
		e := inserts[i]
		delta(e.Table).insert.WriteString("-I " + e.Chain + " 1 " + e.Rule + "\n")
		p.inserted = append(p.inserted, e)
		p.Written.Rules[e.Table]++
	}

	for _, t := range tables {
		d := deltas[t]
		if d == nil || d.empty() {
			continue
		}
		buf.WriteString("*" + string(t) + "\n")
		for _, part := range []*bytes.Buffer{&d.declare, &d.del, &d.rewrite, &d.insert, &d.tails, &d.remove} {
			buf.Write(part.Bytes())
		}
		buf.WriteString("COMMIT\n")
	}
	return p
}

// planBase writes the change of the base fragment: a shared chain keeps its entries,
// so its tail rules are replaced by "-D" and "-A" rather than by a flush. A base chain
// that appears is declared; one that disappears is flushed but not deleted (built-in
// chains may jump to it).
func (s *State) planBase(p *Plan, base *Fragment, delta func(Table) *tableDelta) {
	old := map[chainID]*Chain{}
	if s.base != nil {
		for i := range s.base.Chains {
			old[s.base.Chains[i].id()] = &s.base.Chains[i]
		}
	}
	seen := map[chainID]bool{}
	for i := range base.Chains {
		n := &base.Chains[i]
		seen[n.id()] = true
		o := old[n.id()]
		if o != nil && slices.Equal(o.Rules, n.Rules) {
			continue
		}
		d := delta(n.Table)
		if o == nil {
			declare(&d.declare, n.Name)
		} else {
			for _, r := range o.Rules {
				d.del.WriteString("-D " + n.Name + " " + r + "\n")
			}
		}
		for _, r := range n.Rules {
			appendRule(&d.tails, n.Name, r)
		}
		p.Written.Rules[n.Table] += len(n.Rules)
	}
	if s.base != nil {
		for i := range s.base.Chains {
			if o := &s.base.Chains[i]; !seen[o.id()] {
				declare(&delta(o.Table).declare, o.Name)
			}
		}
	}
}

func compareChainIDs(a, b chainID) int {
	return cmp.Or(strings.Compare(string(a.table), string(b.table)), strings.Compare(a.name, b.name))
}

// Commit records a Plan whose restore succeeded into s.
func (s *State) Commit(p *Plan) {
	if p.baseSet {
		s.count(s.base, -1)
		s.count(p.base, 1)
		s.base = p.base
	}
	for n, f := range p.updates {
		old := s.services[n]
		if old == f {
			continue
		}
		s.count(old, -1)
		s.indexChains(old, -1)
		s.count(f, 1)
		s.indexChains(f, 1)
		if f == nil {
			delete(s.services, n)
		} else {
			s.services[n] = f
		}
	}
	for _, e := range p.removed {
		if positions := s.entries[e]; len(positions) <= 1 {
			delete(s.entries, e)
		} else {
			s.entries[e] = positions[1:]
		}
	}
	for _, e := range p.inserted {
		s.top--
		s.entries[e] = append([]int64{s.top}, s.entries[e]...)
	}
}
