package nftables

import (
	"slices"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
)

// PlanOptions tune how Plan writes the delta.
type PlanOptions struct {
	// DeferChainDeletes flushes chains that are no longer used instead of deleting
	// them, and lists them in Plan.StaleChains so the caller deletes them in a later
	// transaction (use DeleteChains). Kernels before 6.2 may report a chain as still
	// referenced right after the last map element pointing at it was deleted.
	DeferChainDeletes bool
}

// Plan is a delta written into a transaction, to Commit into the State once the
// transaction succeeded. If it failed, discard the Plan and resynchronize with
// WriteFull.
type Plan struct {
	base    *Fragment
	baseSet bool
	updates map[model.ServicePortName]*Fragment
	claims  map[elementID][]claimRef
	// StaleChains are chains flushed but not deleted (DeferChainDeletes only).
	StaleChains []string
}

// Plan writes into tx the minimal operations turning the applied state into the
// state where base replaces the base fragment (nil: unchanged) and each entry of
// updates replaces its ServicePort's fragment (a nil fragment removes the
// ServicePort). Unchanged fragments cost nothing; pass only what changed.
//
// Order in the transaction: new named counters, chains and sets; rewritten chains
// (flush + rules); element deletions; element additions; deletion of chains, then of
// counters and sets no longer used. So objects exist before anything references
// them, and are deleted only after every reference to them is gone.
func (s *State) Plan(tx *knftables.Transaction, base *Fragment, updates map[model.ServicePortName]*Fragment, opts PlanOptions) *Plan {
	p := &Plan{updates: updates, claims: make(map[elementID][]claimRef)}
	type pair struct{ old, new *Fragment }
	pairs := make([]pair, 0, len(updates)+1)
	if base != nil && base != s.base {
		p.base, p.baseSet = base, true
		pairs = append(pairs, pair{s.base, base})
	}
	// Sorted for a deterministic transaction.
	names := make([]model.ServicePortName, 0, len(updates))
	for n := range updates {
		names = append(names, n)
	}
	slices.SortFunc(names, compareNames)
	for _, n := range names {
		if old, nw := s.services[n], updates[n]; old != nw {
			pairs = append(pairs, pair{old, nw})
		}
	}

	oldChains := map[string]*Chain{}
	newChains := map[string]*Chain{}
	oldSets := map[string]*Container{}
	newSets := map[string]*Container{}
	// Named counters (the base fragment's) are added before the rules naming them
	// and deleted once the chains whose rules named them are flushed.
	oldCounters := map[string]*Counter{}
	newCounters := map[string]*Counter{}
	var chainOrder, setOrder, counterOrder []string
	for _, pr := range pairs {
		if pr.old != nil {
			for i := range pr.old.Chains {
				c := &pr.old.Chains[i]
				oldChains[c.Name] = c
				chainOrder = append(chainOrder, c.Name)
			}
			for i := range pr.old.Containers {
				c := &pr.old.Containers[i]
				oldSets[c.Name] = c
				setOrder = append(setOrder, c.Name)
			}
			for i := range pr.old.Counters {
				c := &pr.old.Counters[i]
				oldCounters[c.Name] = c
				counterOrder = append(counterOrder, c.Name)
			}
		}
		if pr.new != nil {
			for i := range pr.new.Chains {
				c := &pr.new.Chains[i]
				newChains[c.Name] = c
				chainOrder = append(chainOrder, c.Name)
			}
			for i := range pr.new.Containers {
				c := &pr.new.Containers[i]
				newSets[c.Name] = c
				setOrder = append(setOrder, c.Name)
			}
			for i := range pr.new.Counters {
				c := &pr.new.Counters[i]
				newCounters[c.Name] = c
				counterOrder = append(counterOrder, c.Name)
			}
		}
	}
	slices.Sort(chainOrder)
	chainOrder = slices.Compact(chainOrder)
	slices.Sort(setOrder)
	setOrder = slices.Compact(setOrder)
	slices.Sort(counterOrder)
	counterOrder = slices.Compact(counterOrder)
	for _, name := range counterOrder {
		if c := newCounters[name]; c != nil && oldCounters[name] == nil {
			tx.Add(c.object())
		}
	}

	// 1. Create new chains and containers (a base chain whose hook changed is
	// recreated: hooks cannot be modified in place).
	var rewrite []*Chain
	for _, name := range chainOrder {
		o, n := oldChains[name], newChains[name]
		switch {
		case n == nil:
		case o == nil:
			tx.Add(n.object())
			rewrite = append(rewrite, n)
		case !equalHook(o.Hook, n.Hook):
			tx.Flush(o.object())
			tx.Delete(o.object())
			tx.Add(n.object())
			rewrite = append(rewrite, n)
		case !equalChain(o, n):
			rewrite = append(rewrite, n)
		}
	}
	// How many fragments declare each container after the update: shared endpoint
	// maps are added with their first user and deleted with their last.
	containerUsers := make(map[string]int, len(setOrder))
	for _, name := range setOrder {
		containerUsers[name] = s.containers[name]
	}
	for _, pr := range pairs {
		for _, f := range []struct {
			frag  *Fragment
			delta int
		}{{pr.old, -1}, {pr.new, 1}} {
			if f.frag != nil {
				for i := range f.frag.Containers {
					containerUsers[f.frag.Containers[i].Name] += f.delta
				}
			}
		}
	}
	for _, name := range setOrder {
		// An existing set is never re-added: its properties cannot change in place
		// (affinity set names cover their timeout, so a new timeout is a new set).
		if n := newSets[name]; n != nil && s.containers[name] == 0 {
			tx.Add(n.addObject())
		}
	}

	// 2. Rewrite changed chains and fill new ones.
	for _, c := range rewrite {
		if o := oldChains[c.Name]; o != nil && equalHook(o.Hook, c.Hook) {
			tx.Flush(&knftables.Chain{Name: c.Name})
		}
		for i := range c.Rules {
			tx.Add(ruleObject(c.Name, &c.Rules[i]))
		}
	}

	// 3. Elements: recompute the claims of every touched element; the kernel
	// holds the first claim's value.
	var touched []elementID
	before := make(map[elementID]*claim)
	for _, pr := range pairs {
		if pr.old != nil {
			for i := range pr.old.Elements {
				id := pr.old.Elements[i].id()
				list, ok := p.claims[id]
				if !ok {
					list = s.touch(id, before)
					touched = append(touched, id)
				}
				p.claims[id] = slices.DeleteFunc(list, func(r claimRef) bool { return r == claimRef{pr.old, int32(i)} })
			}
		}
		if pr.new != nil {
			for i := range pr.new.Elements {
				id := pr.new.Elements[i].id()
				list, ok := p.claims[id]
				if !ok {
					list = s.touch(id, before)
					touched = append(touched, id)
				}
				p.claims[id] = append(list, claimRef{pr.new, int32(i)})
			}
		}
	}
	slices.SortFunc(touched, compareIDs)
	var adds []*knftables.Element
	for _, id := range touched {
		was := before[id]
		var now *claim
		if after := p.claims[id]; len(after) > 0 {
			c := after[0].claim()
			now = &c
		}
		switch {
		case was == nil && now == nil:
		case now == nil:
			tx.Delete(deleteElementObject(id, *was))
		case was == nil:
			adds = append(adds, elementObject(id, *now))
		case was.value != now.value:
			// The kernel refuses to overwrite a map element with another value.
			tx.Delete(deleteElementObject(id, *was))
			adds = append(adds, elementObject(id, *now))
		}
	}
	for _, e := range adds {
		tx.Add(e)
	}

	// 4. Drop chains, then sets, nobody uses any more. All are flushed before any is
	// deleted: removed chains jump to each other (service -> endpoint chains).
	var stale []string
	for _, name := range chainOrder {
		if o := oldChains[name]; o != nil && newChains[name] == nil {
			tx.Flush(&knftables.Chain{Name: name})
			stale = append(stale, name)
		}
	}
	if opts.DeferChainDeletes {
		p.StaleChains = stale
	} else {
		for _, name := range stale {
			tx.Delete(&knftables.Chain{Name: name})
		}
	}
	for _, name := range counterOrder {
		if c := oldCounters[name]; c != nil && newCounters[name] == nil {
			tx.Delete(c.object())
		}
	}
	for _, name := range setOrder {
		if o := oldSets[name]; o != nil && containerUsers[name] == 0 {
			tx.Delete(o.nameObject())
		}
	}
	return p
}

// touch returns the applied claims on id, to be changed by a Plan, and records in
// before the claim the kernel holds for it (nil: none).
func (s *State) touch(id elementID, before map[elementID]*claim) []claimRef {
	list := s.claims.get(id)
	if len(list) > 0 {
		c := list[0].claim()
		before[id] = &c
	} else {
		before[id] = nil
	}
	return list
}

// deleteElementObject names the element id (holding c) for deletion: by key only.
func deleteElementObject(id elementID, c claim) *knftables.Element {
	e := Element{Container: id.container, IsMap: c.value != "", Key: id.key}
	return e.object(false)
}

// Commit records a Plan whose transaction succeeded into s.
func (s *State) Commit(p *Plan) {
	// Unindex every old chain before indexing new ones: a chain may change owner.
	if p.baseSet {
		s.indexChains(s.base, nil)
		s.countContainers(s.base, -1)
		s.countContainers(p.base, 1)
	}
	for n, f := range p.updates {
		s.indexChains(s.services[n], nil)
		if old := s.services[n]; old != f {
			s.countContainers(old, -1)
			s.countContainers(f, 1)
		}
	}
	if p.baseSet {
		s.base = p.base
		s.indexChains(nil, s.base)
	}
	for n, f := range p.updates {
		if f == nil {
			delete(s.services, n)
		} else {
			s.services[n] = f
			s.indexChains(nil, f)
		}
	}
	for id, list := range p.claims {
		s.claims.set(id, list)
	}
}

// DeleteStaleChains writes into tx the deletion of chains left by
// DeferChainDeletes (Plan.StaleChains, possibly of several plans), skipping those
// that committed fragments use again. It returns the number of chains deleted.
func (s *State) DeleteStaleChains(tx *knftables.Transaction, chains []string) int {
	n := 0
	for _, c := range chains {
		if _, live := s.chains[c]; !live {
			tx.Delete(&knftables.Chain{Name: c})
			n++
		}
	}
	return n
}
