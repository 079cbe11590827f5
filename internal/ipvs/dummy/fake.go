package dummy

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
)

// Fake is an in-memory Interface. Node holds the node's own addresses
// (NodeAddresses); SetError injects failures.
type Fake struct {
	mu     sync.Mutex
	exists bool
	bound  map[netip.Addr]bool
	node   []netip.Addr
	errs   map[string]error
}

var _ Interface = (*Fake)(nil)

// NewFake returns a Fake without kube-ipvs0, whose node has the addresses
// node.
func NewFake(node ...netip.Addr) *Fake {
	return &Fake{bound: map[netip.Addr]bool{}, node: slices.Clone(node), errs: map[string]error{}}
}

// SetError makes every later call of the named method ("AddAddress", ...)
// fail with err; a nil err clears it.
func (f *Fake) SetError(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.errs, method)
		return
	}
	f.errs[method] = err
}

// LinkExists reports whether kube-ipvs0 exists.
func (f *Fake) LinkExists() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.exists
}

// EnsureLink implements Interface.
func (f *Fake) EnsureLink() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errs["EnsureLink"]; err != nil {
		return err
	}
	f.exists = true
	return nil
}

// DeleteLink implements Interface; the link's addresses go with it.
func (f *Fake) DeleteLink() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errs["DeleteLink"]; err != nil {
		return err
	}
	f.exists = false
	clear(f.bound)
	return nil
}

// Addresses implements Interface.
func (f *Fake) Addresses() ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("Addresses"); err != nil {
		return nil, err
	}
	return slices.SortedFunc(maps.Keys(f.bound), netip.Addr.Compare), nil
}

// AddAddress implements Interface.
func (f *Fake) AddAddress(a netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("AddAddress"); err != nil {
		return err
	}
	if !a.IsValid() || a.Is4In6() {
		return fmt.Errorf("address %v is neither IPv4 nor IPv6", a)
	}
	f.bound[a.WithZone("")] = true
	return nil
}

// DeleteAddress implements Interface.
func (f *Fake) DeleteAddress(a netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("DeleteAddress"); err != nil {
		return err
	}
	delete(f.bound, a.WithZone(""))
	return nil
}

// NodeAddresses implements Interface.
func (f *Fake) NodeAddresses() ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errs["NodeAddresses"]; err != nil {
		return nil, err
	}
	out := slices.Clone(f.node)
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out), nil
}

// check returns the injected error of method, or ErrLinkNotFound when the
// link is missing. f.mu is held.
func (f *Fake) check(method string) error {
	if err := f.errs[method]; err != nil {
		return err
	}
	if !f.exists {
		return fmt.Errorf("%s: %w", method, ErrLinkNotFound)
	}
	return nil
}
