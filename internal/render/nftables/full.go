package nftables

import (
	"iter"
	"slices"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/nft"
)

// WriteFull writes into tx a transaction that atomically replaces whatever the table
// holds (upstream kube-proxy's ruleset, a previous kproxy's, or a drifted one) with
// the content of s: "add table; delete table; add table", then every object.
// Deleting rather than flushing the table also drops objects nobody renders any more
// and lets base chains change hook or priority; the cost is that session-affinity
// memory is reset. Use WriteRefresh when the table exists, and WriteFull when it
// does not or WriteRefresh's transaction was refused; Plan otherwise.
func WriteFull(tx *knftables.Transaction, s *State) { AddOps(tx, FullOps(s)) }

// WriteRefresh writes into tx a transaction that atomically makes the table, which
// holds existing, equal to s while keeping it: every chain of s is created or
// flushed, every set and map created or flushed, except the dynamic sets of session
// affinity, which keep what the packet path stored (as upstream keeps them); then
// every rule and element is written, and the chains, sets, maps and named counters
// of existing that s lacks are deleted (counters that s has are added again, which
// keeps their values). The kernel refuses it when an existing object's
// definition differs from s's (a base chain's hook, a set's type): then use
// WriteFull.
func WriteRefresh(tx *knftables.Transaction, s *State, existing *Existing) {
	AddOps(tx, RefreshOps(s, existing))
}

// Existing names the chains, sets, maps and named counters the kube-proxy table
// holds, for WriteRefresh and RefreshScript.
type Existing struct {
	Chains, Sets, Maps, Counters []string
}

// FullOps yields the full sync of s (WriteFull's transaction) as typed operations,
// for a writer that encodes them directly (nftnetlink.Executor.RunOps): at 10,000
// Services a full sync is ~140,000 operations, and building a knftables object for
// each, or its text, costs more than encoding it. Every iteration yields the same
// operations.
func FullOps(s *State) iter.Seq[nft.Op] { return s.ops(nil) }

// RefreshOps is FullOps for WriteRefresh's transaction: the table, which holds
// existing, is kept, and so is session-affinity memory.
func RefreshOps(s *State, existing *Existing) iter.Seq[nft.Op] {
	if existing == nil {
		existing = &Existing{}
	}
	return s.ops(existing)
}

func (s *State) ops(existing *Existing) iter.Seq[nft.Op] {
	return func(yield func(nft.Op) bool) {
		stopped := false
		s.fullOps(existing, func(op nft.Op) {
			if !stopped {
				stopped = !yield(op)
			}
		})
	}
}

// fullOps calls emit with every operation of the full sync of s, in order: the
// replacing one (WriteFull) when existing is nil, else the refreshing one
// (WriteRefresh). It is the one definition of that order, which every writer
// shares.
func (s *State) fullOps(existing *Existing, emit func(nft.Op)) {
	emit(tableOp())
	// The existing chains, and sets and maps (one namespace in nft), by name.
	var hadChain, hadSet map[string]bool
	if existing == nil {
		emit(nft.Op{Kind: nft.DeleteTable})
		emit(tableOp())
	} else {
		hadChain, hadSet = nameSet(existing.Chains), nameSet(slices.Concat(existing.Sets, existing.Maps))
	}

	frags := make([]*Fragment, 0, len(s.services)+1)
	if s.base != nil {
		frags = append(frags, s.base)
	}
	for _, n := range s.sortedNames() {
		frags = append(frags, s.services[n])
	}
	// Objects first, then the rules and elements that reference them. Shared
	// containers are declared by several fragments and added once.
	added := make(map[string]bool) // containers
	addedCounters := make(map[string]bool)
	keptChains := make(map[string]bool) // existing chains that s renders
	for _, f := range frags {
		for i := range f.Chains {
			c := &f.Chains[i]
			emit(c.addOp())
			if hadChain[c.Name] {
				keptChains[c.Name] = true
				emit(chainOp(nft.FlushChain, c.Name))
			}
		}
		for i := range f.Containers {
			if c := &f.Containers[i]; !added[c.Name] {
				added[c.Name] = true
				emit(c.addOp())
				// Dynamic sets hold session affinity: kept, as upstream.
				if hadSet[c.Name] && c.Timeout == 0 {
					emit(containerOp(nft.FlushSet, c.Name, c.IsMap))
				}
			}
		}
		// Adding an existing counter keeps its value (as upstream's syncs do).
		for i := range f.Counters {
			if c := &f.Counters[i]; !addedCounters[c.Name] {
				addedCounters[c.Name] = true
				emit(counterOp(nft.AddCounter, c.Name))
			}
		}
	}
	// Chains nobody renders are emptied now (they may jump to each other or name
	// sets) and deleted at the end, once nothing refers to them.
	var staleChains []string
	if existing != nil {
		for _, n := range existing.Chains {
			if !keptChains[n] {
				staleChains = append(staleChains, n)
				emit(chainOp(nft.FlushChain, n))
			}
		}
	}
	for _, f := range frags {
		for i := range f.Chains {
			c := &f.Chains[i]
			for j := range c.Rules {
				emit(ruleOp(c.Name, &c.Rules[j]))
			}
		}
	}
	// Elements grouped by container (so that a writer may pack a container's
	// elements into few messages), containers in name order, and within one, in
	// the order of the fragments first claiming them: deterministic without
	// sorting every element. The value written is the claim the kernel holds (the
	// first), whichever fragment brought the element first here.
	// A container's elements are listed as runs, each a fragment's consecutive
	// elements of that container (a fragment's elements are sorted by container,
	// so it has about one run per container it fills): the lists are live while
	// the whole batch is encoded, the sync's peak, and a ref per element was 2.6 MB
	// at 10,000 Services. (Counted first: growing them by appending would leave as
	// much garbage again.)
	perContainer := make(map[string]int)
	forRuns(frags, func(_, i int, f *Fragment) { perContainer[f.Elements[i].Container]++ })
	byContainer := make(map[string][]elementRun, len(perContainer))
	for name, n := range perContainer {
		byContainer[name] = make([]elementRun, 0, n)
	}
	forRuns(frags, func(fi, i int, f *Fragment) {
		c := f.Elements[i].Container
		byContainer[c] = append(byContainer[c], elementRun{int32(fi), int32(i)})
	})
	containers := make([]string, 0, len(byContainer))
	for name := range byContainer {
		containers = append(containers, name)
	}
	slices.Sort(containers)
	var emitted map[elementID]bool // shared elements already written
	for _, name := range containers {
		for _, run := range byContainer[name] {
			f := frags[run.frag]
			for i := int(run.start); i < len(f.Elements) && f.Elements[i].Container == name; i++ {
				ref := refTo(f, i)
				id := ref.element().id()
				if s.claims.only(f, i) {
					emit(elementOp(id, ref.claim()))
					continue
				}
				if emitted == nil {
					emitted = make(map[elementID]bool)
				}
				if emitted[id] {
					continue
				}
				emitted[id] = true
				emit(elementOp(id, s.claims.get(id)[0].claim()))
			}
		}
	}
	if existing == nil {
		return
	}
	// Sets and maps first: a map element may be the last reference to a chain.
	for _, kind := range []struct {
		names []string
		isMap bool
	}{{existing.Sets, false}, {existing.Maps, true}} {
		for _, n := range kind.names {
			if !added[n] {
				emit(containerOp(nft.DeleteSet, n, kind.isMap))
			}
		}
	}
	for _, n := range staleChains {
		emit(chainOp(nft.DeleteChain, n))
	}
	// Counters last: only rules of chains flushed above referred to them.
	for _, n := range existing.Counters {
		if !addedCounters[n] {
			emit(counterOp(nft.DeleteCounter, n))
		}
	}
}

// elementRun is a run of elements of one container in a fragment: those of
// frags[frag] from index start on, while their container is the same.
type elementRun struct{ frag, start int32 }

// forRuns calls fn with the start of every run of elements of one container in
// frags, fragment by fragment, in order.
func forRuns(frags []*Fragment, fn func(frag, start int, f *Fragment)) {
	for fi, f := range frags {
		for i := range f.Elements {
			if i == 0 || f.Elements[i].Container != f.Elements[i-1].Container {
				fn(fi, i, f)
			}
		}
	}
}

func nameSet(names []string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}
