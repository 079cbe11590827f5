package iptables

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
	testingexec "k8s.io/utils/exec/testing"
)

var monitorTables = []Table{TableMangle, TableNAT, TableFilter}

const monitorInterval = time.Minute

// bound is how long a test waits for the monitor goroutine to react.
const bound = 10 * time.Second

// monitorRun is a monitor on a fake clock and a fake iptables.
type monitorRun struct {
	t       *testing.T
	ipt     *Fake
	clk     *clocktesting.FakeClock
	reloads chan struct{}
	done    chan error
	cancel  context.CancelFunc
}

func startMonitor(t *testing.T, ipt *Fake) *monitorRun {
	t.Helper()
	_, tctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(tctx)
	m := &monitorRun{t: t, ipt: ipt, clk: clocktesting.NewFakeClock(time.Unix(1000, 0)), reloads: make(chan struct{}, 100), done: make(chan error, 1), cancel: cancel}
	go func() {
		m.done <- monitor(ctx, m.clk, ipt, CanaryChain, monitorTables, func() { m.reloads <- struct{}{} }, monitorInterval)
	}()
	t.Cleanup(func() { m.stop() })
	return m
}

// waitBlocked waits until the monitor waits on the clock again.
func (m *monitorRun) waitBlocked() {
	m.t.Helper()
	deadline := time.Now().Add(bound)
	for !m.clk.HasWaiters() {
		if time.Now().After(deadline) {
			m.t.Fatalf("the monitor did not wait on the clock within %s", bound)
		}
		time.Sleep(time.Millisecond)
	}
}

// step advances the clock by d once the monitor waits, and waits until it
// waits again (or reloaded: the reload channel is buffered).
func (m *monitorRun) step(d time.Duration) {
	m.t.Helper()
	m.waitBlocked()
	m.clk.Step(d)
	m.waitBlocked()
}

func (m *monitorRun) reloadCount() int { return len(m.reloads) }

func (m *monitorRun) stop() {
	m.cancel()
	select {
	case err := <-m.done:
		if err != nil {
			m.t.Errorf("monitor returned %v", err)
		}
		m.done <- nil // later stops return at once
	case <-time.After(bound):
		m.t.Fatalf("the monitor did not stop within %s", bound)
	}
}

func (m *monitorRun) canaries() []bool {
	var out []bool
	for _, table := range monitorTables {
		out = append(out, m.ipt.HasChain(table, CanaryChain))
	}
	return out
}

func allTrue(bs []bool) bool {
	for _, b := range bs {
		if !b {
			return false
		}
	}
	return true
}

// deleteCanary deletes one canary once the monitor has set them up.
func (m *monitorRun) deleteCanary(table Table) {
	m.t.Helper()
	m.waitBlocked()
	if err := m.ipt.Restore(context.Background(), []byte("*"+string(table)+"\n-X "+string(CanaryChain)+"\nCOMMIT\n")); err != nil {
		m.t.Fatal(err)
	}
}

func TestMonitorReloadsAfterFlush(t *testing.T) {
	m := startMonitor(t, NewFake(v1.IPv4Protocol))
	m.waitBlocked()
	if got := m.canaries(); !allTrue(got) {
		t.Fatalf("canaries after start: %v, want one per table", got)
	}
	m.step(monitorInterval)
	if m.reloadCount() != 0 {
		t.Fatal("reloaded while the canaries exist")
	}
	// Someone flushes every table.
	for _, table := range monitorTables {
		m.deleteCanary(table)
	}
	m.step(monitorInterval)
	if m.reloadCount() != 1 {
		t.Fatalf("reloads after a flush = %d, want 1", m.reloadCount())
	}
	if got := m.canaries(); !allTrue(got) {
		t.Errorf("canaries after the reload: %v, want them back", got)
	}
	m.step(monitorInterval)
	if m.reloadCount() != 1 {
		t.Errorf("reloads = %d after a quiet interval, want still 1", m.reloadCount())
	}
}

func TestMonitorWaitsForTheOtherTables(t *testing.T) {
	m := startMonitor(t, NewFake(v1.IPv4Protocol))
	m.deleteCanary(TableMangle) // only the first table, so far
	m.step(monitorInterval)
	m.step(flushPoll)
	if m.reloadCount() != 0 {
		t.Fatal("reloaded in the middle of a flush")
	}
	m.deleteCanary(TableNAT)
	m.deleteCanary(TableFilter)
	m.step(flushPoll)
	if m.reloadCount() != 1 {
		t.Fatalf("reloads = %d once every canary is gone, want 1", m.reloadCount())
	}
}

func TestMonitorReloadsAfterInconsistentFlush(t *testing.T) {
	m := startMonitor(t, NewFake(v1.IPv4Protocol))
	m.deleteCanary(TableMangle) // the others stay
	m.step(monitorInterval)
	for i := 0; i < int(flushTimeout/flushPoll) && m.reloadCount() == 0; i++ {
		m.step(flushPoll)
	}
	if m.reloadCount() != 1 {
		t.Fatalf("reloads = %d after %s with one canary gone, want 1", m.reloadCount(), flushTimeout)
	}
}

func TestMonitorLockTimeoutIsNotAFlush(t *testing.T) {
	ipt := NewFake(v1.IPv4Protocol)
	m := startMonitor(t, ipt)
	m.waitBlocked()
	ipt.FailNext(OpChainExists, testingexec.FakeExitError{Status: 4})
	m.step(monitorInterval)
	if m.reloadCount() != 0 {
		t.Fatal("a check that could not get the lock counted as a flush")
	}
	// Any other failure of the check means the canary is gone (upstream).
	ipt.FailNext(OpChainExists, errors.New("something else"))
	m.step(monitorInterval)
	m.step(flushTimeout) // the other tables' canaries are still there
	if m.reloadCount() != 1 {
		t.Fatalf("reloads = %d after a failed check, want 1", m.reloadCount())
	}
}

func TestMonitorRetriesCanarySetup(t *testing.T) {
	ipt := NewFake(v1.IPv4Protocol)
	ipt.FailNext(OpEnsureChain, errors.New("no lock"))
	m := startMonitor(t, ipt)
	m.waitBlocked()
	if got := m.canaries(); allTrue(got) {
		t.Fatalf("canaries %v although setting up the first failed", got)
	}
	m.step(monitorInterval)
	if got := m.canaries(); !allTrue(got) {
		t.Errorf("canaries after the retry: %v", got)
	}
}

func TestMonitorStopDeletesCanaries(t *testing.T) {
	m := startMonitor(t, NewFake(v1.IPv6Protocol))
	m.waitBlocked()
	m.stop()
	for i, has := range m.canaries() {
		if has {
			t.Errorf("canary in %s left after the monitor stopped", monitorTables[i])
		}
	}
}

func TestMonitorArguments(t *testing.T) {
	ctx := context.Background()
	ipt := NewFake(v1.IPv4Protocol)
	if err := Monitor(ctx, ipt, CanaryChain, nil, func() {}, time.Second); err == nil {
		t.Error("no tables accepted")
	}
	if err := Monitor(ctx, ipt, CanaryChain, monitorTables, func() {}, 0); err == nil {
		t.Error("zero interval accepted")
	}
}

// TestMonitorRealClock runs the exported Monitor with a short interval.
func TestMonitorRealClock(t *testing.T) {
	ipt := NewFake(v1.IPv4Protocol)
	ctx, cancel := context.WithCancel(context.Background())
	var reloads atomic.Int32
	reloaded := make(chan struct{}, 10)
	done := make(chan error, 1)
	go func() {
		done <- Monitor(ctx, ipt, CanaryChain, monitorTables, func() { reloads.Add(1); reloaded <- struct{}{} }, 5*time.Millisecond)
	}()
	deadline := time.Now().Add(bound)
	for !ipt.HasChain(TableFilter, CanaryChain) {
		if time.Now().After(deadline) {
			t.Fatal("canaries not created")
		}
		time.Sleep(time.Millisecond)
	}
	for _, table := range monitorTables {
		if err := ipt.DeleteChain(ctx, table, CanaryChain); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-reloaded:
	case <-time.After(bound):
		t.Fatalf("no reload within %s of a flush", bound)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Monitor = %v", err)
		}
	case <-time.After(bound):
		t.Fatal("Monitor did not return after cancel")
	}
}
