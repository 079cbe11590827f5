package nfacct

import (
	"errors"
	"fmt"
	"sync"
)

// Interface creates and reads nfacct counters.
type Interface interface {
	// Ensure creates the counter name unless it exists.
	Ensure(name string) error
	// Get returns the counter name; the error wraps ErrNotFound when it does
	// not exist.
	Get(name string) (Counter, error)
}

// Counter is an nfacct object's state.
type Counter struct {
	Name    string
	Packets uint64
	Bytes   uint64
}

// ErrNotFound is returned (wrapped) by Get for a counter that does not exist.
var ErrNotFound = errors.New("nfacct counter not found")

// MaxNameLength is the kernel's limit on counter names (NFACCT_NAME_MAX less the
// terminating zero).
const MaxNameLength = 31

func checkName(name string) error {
	if name == "" || len(name) > MaxNameLength {
		return fmt.Errorf("nfacct counter name %q: must be 1 to %d bytes", name, MaxNameLength)
	}
	return nil
}

// Fake is an in-memory Interface. Err, when set, is returned by every call.
type Fake struct {
	mu       sync.Mutex
	counters map[string]*Counter
	Err      error
}

var _ Interface = (*Fake)(nil)

// NewFake returns an empty Fake.
func NewFake() *Fake { return &Fake{counters: map[string]*Counter{}} }

// Ensure implements Interface.
func (f *Fake) Ensure(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return f.Err
	}
	if _, ok := f.counters[name]; !ok {
		f.counters[name] = &Counter{Name: name}
	}
	return nil
}

// Get implements Interface.
func (f *Fake) Get(name string) (Counter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return Counter{}, f.Err
	}
	c, ok := f.counters[name]
	if !ok {
		return Counter{}, fmt.Errorf("%q: %w", name, ErrNotFound)
	}
	return *c, nil
}

// Count adds packets and bytes to an existing counter, as matching rules would.
func (f *Fake) Count(name string, packets, bytes uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.counters[name]
	if !ok {
		return fmt.Errorf("%q: %w", name, ErrNotFound)
	}
	c.Packets += packets
	c.Bytes += bytes
	return nil
}
