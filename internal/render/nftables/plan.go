package nftables

import (
	"slices"

	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/nft"
)

// PlanOptions tune how Plan writes the delta.
type PlanOptions struct {
	// DeferChainDeletes flushes chains that are no longer used instead of deleting
	// them, and lists them in Plan.StaleChains so the caller deletes them in a later
	// transaction (use DeleteChains). Kernels before 6.2 may report a chain as still
	// referenced right after the last map element pointing at it was deleted.
	DeferChainDeletes bool
}

// Plan is a delta: the operations of one transaction, to Commit into the State
// once the transaction succeeded. If it failed, discard the Plan and resynchronize
// with a full sync.
type Plan struct {
	// Ops are the transaction's operations, in order.
	Ops     []nft.Op
	base    *Fragment
	baseSet bool
	updates map[model.ServicePortName]*Fragment
	claims  map[elementID][]claimRef
	// StaleChains are chains flushed but not deleted (DeferChainDeletes only).
	StaleChains []string
}

// Plan returns the minimal operations (Plan.Ops) turning the applied state into the
// state where base replaces the base fragment (nil: unchanged) and each entry of
// updates replaces its ServicePort's fragment (a nil fragment removes the
// ServicePort). Unchanged fragments cost nothing; pass only what changed.
//
// Order in the transaction: new named counters, chains and sets; rewritten chains
// (flush + rules); element deletions; element additions; deletion of chains, then of
// counters and sets no longer used. So objects exist before anything references
// them, and are deleted only after every reference to them is gone.
func (s *State) Plan(base *Fragment, updates map[model.ServicePortName]*Fragment, opts PlanOptions) *Plan {
	p := &Plan{updates: updates, claims: make(map[elementID][]claimRef)}
	emit := func(op nft.Op) { p.Ops = append(p.Ops, op) }
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
			emit(counterOp(nft.AddCounter, name))
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
			emit(n.addOp())
			rewrite = append(rewrite, n)
		case !equalHook(o.Hook, n.Hook):
			emit(chainOp(nft.FlushChain, name))
			emit(chainOp(nft.DeleteChain, name))
			emit(n.addOp())
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
			emit(n.addOp())
		}
	}

	// 2. Rewrite changed chains and fill new ones.
	for _, c := range rewrite {
		if o := oldChains[c.Name]; o != nil && equalHook(o.Hook, c.Hook) {
			emit(chainOp(nft.FlushChain, c.Name))
		}
		for i := range c.Rules {
			emit(ruleOp(c.Name, &c.Rules[i]))
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
				p.claims[id] = slices.DeleteFunc(list, func(r claimRef) bool { return r == refTo(pr.old, i) })
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
				p.claims[id] = append(list, refTo(pr.new, i))
			}
		}
	}
	slices.SortFunc(touched, compareIDs)
	var adds []nft.Op
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
			emit(deleteElementOp(id, *was))
		case was == nil:
			adds = append(adds, elementOp(id, *now))
		case was.value != now.value:
			// The kernel refuses to overwrite a map element with another value.
			emit(deleteElementOp(id, *was))
			adds = append(adds, elementOp(id, *now))
		}
	}
	p.Ops = append(p.Ops, adds...)

	// 4. Drop chains, then sets, nobody uses any more. All are flushed before any is
	// deleted: removed chains jump to each other (service -> endpoint chains).
	var stale []string
	for _, name := range chainOrder {
		if o := oldChains[name]; o != nil && newChains[name] == nil {
			emit(chainOp(nft.FlushChain, name))
			stale = append(stale, name)
		}
	}
	if opts.DeferChainDeletes {
		p.StaleChains = stale
	} else {
		for _, name := range stale {
			emit(chainOp(nft.DeleteChain, name))
		}
	}
	for _, name := range counterOrder {
		if c := oldCounters[name]; c != nil && newCounters[name] == nil {
			emit(counterOp(nft.DeleteCounter, name))
		}
	}
	for _, name := range setOrder {
		if o := oldSets[name]; o != nil && containerUsers[name] == 0 {
			emit(containerOp(nft.DeleteSet, name, o.IsMap))
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

// DeleteStaleChains returns the deletion of chains left by DeferChainDeletes
// (Plan.StaleChains, possibly of several plans), skipping those that committed
// fragments use again.
func (s *State) DeleteStaleChains(chains []string) []nft.Op {
	var ops []nft.Op
	for _, c := range chains {
		if _, live := s.chains[c]; !live {
			ops = append(ops, chainOp(nft.DeleteChain, c))
		}
	}
	return ops
}
