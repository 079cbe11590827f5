package localnodeports

import (
	"slices"
	"sync"
)

// Fake is an Interface that records every Sync, for tests of its callers.
type Fake struct {
	mu    sync.Mutex
	syncs [][]Spec
}

var _ Interface = (*Fake)(nil)

// Sync records specs.
func (f *Fake) Sync(specs []Spec) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.syncs = append(f.syncs, slices.Clone(specs))
}

// Syncs returns every recorded Sync, oldest first.
func (f *Fake) Syncs() [][]Spec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.syncs)
}

// Last returns the specs of the last Sync (false if none).
func (f *Fake) Last() ([]Spec, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.syncs) == 0 {
		return nil, false
	}
	return slices.Clone(f.syncs[len(f.syncs)-1]), true
}
