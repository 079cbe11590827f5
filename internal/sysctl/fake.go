package sysctl

import (
	"fmt"
	"io/fs"
	"sync"
)

// Fake is an in-memory Interface. Unknown names read as fs.ErrNotExist; names in
// ReadOnly fail to write with fs.ErrPermission (as a read-only /proc/sys does).
type Fake struct {
	mu       sync.Mutex
	values   map[string]int
	readOnly map[string]bool
	// Writes records every successful Set in order, as "name=value".
	writes []string
}

var _ Interface = (*Fake)(nil)

// NewFake returns a Fake holding the given values (names in either form).
func NewFake(values map[string]int) *Fake {
	f := &Fake{values: map[string]int{}, readOnly: map[string]bool{}}
	for k, v := range values {
		f.values[NormalizeName(k)] = v
	}
	return f
}

// SetReadOnly makes writes to the names fail; with no names every write fails.
func (f *Fake) SetReadOnly(names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(names) == 0 {
		f.readOnly["*"] = true
	}
	for _, n := range names {
		f.readOnly[NormalizeName(n)] = true
	}
}

// Get implements Interface.
func (f *Fake) Get(name string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.values[NormalizeName(name)]
	if !ok {
		return -1, fmt.Errorf("sysctl %s: %w", name, fs.ErrNotExist)
	}
	return v, nil
}

// Set implements Interface.
func (f *Fake) Set(name string, value int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := NormalizeName(name)
	if f.readOnly["*"] || f.readOnly[n] {
		return fmt.Errorf("sysctl %s: %w", name, fs.ErrPermission)
	}
	f.values[n] = value
	f.writes = append(f.writes, fmt.Sprintf("%s=%d", n, value))
	return nil
}

// Writes returns the successful writes in order.
func (f *Fake) Writes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.writes...)
}

// FakeModuleParam is an in-memory ModuleParam.
type FakeModuleParam struct {
	mu      sync.Mutex
	Value   int
	GetErr  error
	SetErr  error
	Written []int
}

var _ ModuleParam = (*FakeModuleParam)(nil)

// Get implements ModuleParam.
func (f *FakeModuleParam) Get() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.GetErr != nil {
		return -1, f.GetErr
	}
	return f.Value, nil
}

// Set implements ModuleParam.
func (f *FakeModuleParam) Set(v int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.SetErr != nil {
		return f.SetErr
	}
	f.Value = v
	f.Written = append(f.Written, v)
	return nil
}

// FakeOOMScoreAdjuster records the value, or fails with Err.
type FakeOOMScoreAdjuster struct {
	Err   error
	Value *int
}

// SetOOMScoreAdj implements OOMScoreAdjuster.
func (f *FakeOOMScoreAdjuster) SetOOMScoreAdj(v int) error {
	if f.Err != nil {
		return f.Err
	}
	f.Value = &v
	return nil
}
