package nftables

import (
	"cmp"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/nft"
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
	value   nft.Elem
	comment string
}

// NewState builds the State describing exactly base plus services, as WriteFull
// programs it. The maps and fragments are kept, not copied: do not mutate them.
func NewState(base *Fragment, services map[model.ServicePortName]*Fragment) *State {
	elements, chains := 0, 0
	for _, f := range services {
		elements, chains = elements+len(f.Elements), chains+len(f.Chains)
	}
	s := &State{base: base, services: services, claims: newClaimIndex(elements), chains: make(map[string]struct{}, chains),
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
//
// Each fragment is its own allocation, not an element of one array: a partial sync
// replaces fragments one by one, and a pointer into a shared array keeps all of it
// alive, with every replaced fragment's elements and chains. That held the old
// version of every Service changed since the full sync until the last of them
// changed: at 10,000 Services under churn, the heap grew by 10% over the minutes
// the churn took to reach every Service (docs/reliability.md, the 30-minute soak).
func RenderServices(cfg *Config, views []*model.ServicePortView) map[model.ServicePortName]*Fragment {
	frags := make([]*Fragment, len(views))
	const minPerWorker = 512
	workers := max(1, min(runtime.GOMAXPROCS(0), len(views)/minPerWorker))
	per := (len(views) + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < len(views); lo += per {
		hi := min(lo+per, len(views))
		wg.Go(func() {
			var scratch []Element
			for i := lo; i < hi; i++ {
				f := renderService(cfg, views[i], &scratch)
				frags[i] = &f
			}
		})
	}
	wg.Wait()
	out := make(map[model.ServicePortName]*Fragment, len(views))
	for i, v := range views {
		out[v.Name] = frags[i]
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

func compareIDs(a, b elementID) int {
	if c := strings.Compare(a.container, b.container); c != 0 {
		return c // the keys' text is not printed (see compareElements)
	}
	return nft.CompareText(a.key, b.key)
}
