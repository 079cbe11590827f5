package nftables

import (
	"cmp"
	"runtime"
	"slices"
	"strings"
	"sync"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
)

// State is the content of the table as last applied: the base fragment, one
// fragment per ServicePort, and, for every element, the fragments claiming it.
// Several fragments may claim one element (every port of a Service adds its ClusterIP
// to cluster-ips; two Services sharing a backend add the same hairpin entry), so an
// element is deleted only when its last claimant lets go. A State is not safe for
// concurrent use; Plan only reads it, Commit mutates it.
type State struct {
	base     *Fragment
	services map[model.ServicePortName]*Fragment
	claims   *claimIndex
	// chains indexes the names of the chains of all fragments, to tell whether a
	// chain left stale by PlanOptions.DeferChainDeletes came back into use.
	chains map[string]struct{}
	// containers counts the fragments declaring each set or map: the shared
	// endpoint maps are declared by every ServicePort using them, and exist while
	// one does.
	containers map[string]int
}

// claim is one fragment's claim on an element. The kernel holds the value of the
// first claim; claims with other values (conflicting Services) wait their turn.
type claim struct {
	value, comment string
}

// NewState builds the State describing exactly base plus services, as WriteFull
// programs it. The maps and fragments are kept, not copied: do not mutate them.
func NewState(base *Fragment, services map[model.ServicePortName]*Fragment) *State {
	s := &State{base: base, services: services, claims: newClaimIndex(), chains: make(map[string]struct{}),
		containers: make(map[string]int)}
	if s.services == nil {
		s.services = make(map[model.ServicePortName]*Fragment)
	}
	s.addClaims(base)
	s.indexChains(nil, base)
	s.countContainers(base, 1)
	for _, name := range s.sortedNames() {
		s.addClaims(s.services[name])
		s.indexChains(nil, s.services[name])
		s.countContainers(s.services[name], 1)
	}
	return s
}

// countContainers adds delta to the count of every container f declares.
func (s *State) countContainers(f *Fragment, delta int) {
	if f == nil {
		return
	}
	for i := range f.Containers {
		n := s.containers[f.Containers[i].Name] + delta
		if n == 0 {
			delete(s.containers, f.Containers[i].Name)
		} else {
			s.containers[f.Containers[i].Name] = n
		}
	}
}

// indexChains replaces old's chains by new's in the chain index.
func (s *State) indexChains(old, new *Fragment) {
	if old != nil {
		for i := range old.Chains {
			delete(s.chains, old.Chains[i].Name)
		}
	}
	if new != nil {
		for i := range new.Chains {
			s.chains[new.Chains[i].Name] = struct{}{}
		}
	}
}

// RenderServices renders every view (see RenderService), keyed by ServicePort name.
// Views are rendered in parallel, on up to GOMAXPROCS goroutines that end before
// it returns: a full sync renders every Service, and rendering is pure.
func RenderServices(cfg *Config, views []*model.ServicePortView) map[model.ServicePortName]*Fragment {
	frags := make([]Fragment, len(views))
	const minPerWorker = 512
	workers := max(1, min(runtime.GOMAXPROCS(0), len(views)/minPerWorker))
	per := (len(views) + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < len(views); lo += per {
		hi := min(lo+per, len(views))
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				frags[i] = RenderService(cfg, views[i])
			}
		})
	}
	wg.Wait()
	out := make(map[model.ServicePortName]*Fragment, len(views))
	for i, v := range views {
		out[v.Name] = &frags[i]
	}
	return out
}

func (s *State) addClaims(f *Fragment) {
	if f == nil {
		return
	}
	for i := range f.Elements {
		s.claims.add(f, i)
	}
}

func (s *State) sortedNames() []model.ServicePortName {
	names := make([]model.ServicePortName, 0, len(s.services))
	for n := range s.services {
		names = append(names, n)
	}
	slices.SortFunc(names, compareNames)
	return names
}

func compareNames(a, b model.ServicePortName) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name),
		strings.Compare(a.Port, b.Port), strings.Compare(string(a.Protocol), string(b.Protocol)))
}

// Base returns the applied base fragment.
func (s *State) Base() *Fragment { return s.base }

// Service returns the applied fragment of a ServicePort (nil when absent).
func (s *State) Service(name model.ServicePortName) *Fragment { return s.services[name] }

// Len returns the number of ServicePorts in the state.
func (s *State) Len() int { return len(s.services) }

// WriteFull writes into tx a transaction that atomically replaces whatever the table
// holds (upstream kube-proxy's ruleset, a previous kproxy's, or a drifted one) with
// the content of s: "add table; delete table; add table", then every object.
// Deleting rather than flushing the table also drops objects nobody renders any more
// and lets base chains change hook or priority; the cost is that session-affinity
// memory is reset, so use it for the first sync and for recovery, and Plan otherwise.
func WriteFull(tx *knftables.Transaction, s *State) {
	s.fullOps(func(op fullOp) {
		switch op.kind {
		case opAddTable:
			tx.Add(tableObject())
		case opDeleteTable:
			tx.Delete(&knftables.Table{})
		case opAddChain:
			tx.Add(op.chain.object())
		case opAddContainer:
			tx.Add(op.container.addObject())
		case opAddRule:
			tx.Add(op.rule.object(op.chain.Name))
		case opAddElement:
			tx.Add(elementObject(op.id, op.claim))
		}
	})
}

func tableObject() *knftables.Table {
	return &knftables.Table{Comment: knftables.PtrTo(TableComment)}
}

// fullOp is one operation of a full sync.
type fullOp struct {
	kind      fullOpKind
	chain     *Chain
	rule      *Rule
	container *Container
	id        elementID
	claim     claim
}

type fullOpKind int

const (
	opAddTable fullOpKind = iota
	opDeleteTable
	opAddChain
	opAddContainer
	opAddRule
	opAddElement
)

// fullOps calls emit with every operation of the full sync of s, in order. It is
// the one definition of that order, which WriteFull and FullScript share.
func (s *State) fullOps(emit func(fullOp)) {
	emit(fullOp{kind: opAddTable})
	emit(fullOp{kind: opDeleteTable})
	emit(fullOp{kind: opAddTable})

	frags := make([]*Fragment, 0, len(s.services)+1)
	if s.base != nil {
		frags = append(frags, s.base)
	}
	for _, n := range s.sortedNames() {
		frags = append(frags, s.services[n])
	}
	// Objects first, then the rules and elements that reference them. Shared
	// containers are declared by several fragments and added once.
	added := make(map[string]bool)
	for _, f := range frags {
		for i := range f.Chains {
			emit(fullOp{kind: opAddChain, chain: &f.Chains[i]})
		}
		for i := range f.Containers {
			if c := &f.Containers[i]; !added[c.Name] {
				added[c.Name] = true
				emit(fullOp{kind: opAddContainer, container: c})
			}
		}
	}
	for _, f := range frags {
		for i := range f.Chains {
			c := &f.Chains[i]
			for j := range c.Rules {
				emit(fullOp{kind: opAddRule, chain: c, rule: &c.Rules[j]})
			}
		}
	}
	// Elements grouped by container (so that a writer may pack a container's
	// elements into few messages), containers in name order, and within one, in
	// the order of the fragments first claiming them: deterministic without
	// sorting every element. The value written is the claim the kernel holds (the
	// first), whichever fragment brought the element first here.
	byContainer := make(map[string][]claimRef)
	for _, f := range frags {
		for i := range f.Elements {
			c := f.Elements[i].Container
			byContainer[c] = append(byContainer[c], claimRef{f, int32(i)})
		}
	}
	containers := make([]string, 0, len(byContainer))
	for name := range byContainer {
		containers = append(containers, name)
	}
	slices.Sort(containers)
	var emitted map[elementID]bool // shared elements already written
	for _, name := range containers {
		for _, ref := range byContainer[name] {
			id := ref.element().id()
			if s.claims.only(ref.f, int(ref.i)) {
				emit(fullOp{kind: opAddElement, id: id, claim: ref.claim()})
				continue
			}
			if emitted == nil {
				emitted = make(map[elementID]bool)
			}
			if emitted[id] {
				continue
			}
			emitted[id] = true
			emit(fullOp{kind: opAddElement, id: id, claim: s.claims.get(id)[0].claim()})
		}
	}
}

func compareIDs(a, b elementID) int {
	return cmp.Or(strings.Compare(a.container, b.container), strings.Compare(a.key, b.key))
}

// elementObject builds the element for id holding c. Whether the container is a map
// follows from the claim: set elements have no value.
func elementObject(id elementID, c claim) *knftables.Element {
	e := Element{Container: id.container, IsMap: c.value != "", Key: id.key, Value: c.value, Comment: c.comment}
	return e.object(true)
}
