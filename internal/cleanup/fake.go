package cleanup

import (
	"context"
	"fmt"
	"sync"

	"github.com/vishvananda/netlink"
	"sigs.k8s.io/knftables"
)

// FakeNFTables returns an NFTablesFactory serving the given fakes; a family
// without a fake behaves like a host where nft is unusable.
func FakeNFTables(fakes map[knftables.Family]*knftables.Fake) NFTablesFactory {
	return func(family knftables.Family, table string) (knftables.Interface, error) {
		f, ok := fakes[family]
		if !ok {
			return nil, fmt.Errorf("no nftables for family %s", family)
		}
		return f, nil
	}
}

// FakeIPSets is an in-memory IPSets.
type FakeIPSets struct {
	mu sync.Mutex
	// Sets are the existing sets.
	Sets map[string]bool
	// Unavailable makes Available report false.
	Unavailable bool
	// InUse sets cannot be destroyed (referenced by a rule).
	InUse map[string]bool
}

var _ IPSets = (*FakeIPSets)(nil)

// Available implements IPSets.
func (s *FakeIPSets) Available(context.Context) bool { return !s.Unavailable }

// Destroy implements IPSets.
func (s *FakeIPSets) Destroy(_ context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.InUse[name] {
		return fmt.Errorf("ipset destroy %s: set is in use by a kernel component", name)
	}
	delete(s.Sets, name)
	return nil
}

// FakeLinks is an in-memory Links.
type FakeLinks struct {
	mu    sync.Mutex
	Links map[string]netlink.Link
}

var _ Links = (*FakeLinks)(nil)

// LinkByName implements Links.
func (l *FakeLinks) LinkByName(name string) (netlink.Link, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if link, ok := l.Links[name]; ok {
		return link, nil
	}
	return nil, netlink.LinkNotFoundError{}
}

// LinkDel implements Links.
func (l *FakeLinks) LinkDel(link netlink.Link) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.Links, link.Attrs().Name)
	return nil
}

// FakeIPVS is an in-memory IPVS.
type FakeIPVS struct {
	// Err is returned by Flush (e.g. ErrIPVSUnavailable).
	Err error
	// Flushes counts Flush calls.
	Flushes int
}

var _ IPVS = (*FakeIPVS)(nil)

// Flush implements IPVS.
func (v *FakeIPVS) Flush(context.Context) error {
	v.Flushes++
	return v.Err
}
