package bench

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/testing/poll"
)

// fakeNetwork answers probes of a Service once it is programmed; a probe of one not
// yet programmed waits, as a real one does, until ProbeTimeout or its context ends.
type fakeNetwork struct {
	mu         sync.Mutex
	programmed map[*Svc]bool
	probes     map[*Svc]int
	changed    chan struct{} // closed and replaced by program
}

func newFakeNetwork() *fakeNetwork {
	return &fakeNetwork{programmed: map[*Svc]bool{}, probes: map[*Svc]int{}, changed: make(chan struct{})}
}

func (f *fakeNetwork) program(svcs ...*Svc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range svcs {
		f.programmed[s] = true
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeNetwork) probe(ctx context.Context, s *Svc) bool {
	f.mu.Lock()
	f.probes[s]++
	ok, changed := f.programmed[s], f.changed
	f.mu.Unlock()
	if ok {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	select {
	case <-ctx.Done():
	case <-changed: // a real SYN sent earlier is not answered either
	}
	return false
}

func (f *fakeNetwork) probeCount(s *Svc) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.probes[s]
}

func TestWaitProbesWatchesOneServiceThenProbesAll(t *testing.T) {
	net := newFakeNetwork()
	sample := []*Svc{{Index: 0}, {Index: 1}, {Index: 2}}
	done := make(chan time.Time, 1)
	go func() { done <- waitProbes(context.Background(), net.probe, sample) }()

	// Until the first Service answers, only it is probed, several times.
	poll.Until(t, "three probes of the first Service", func() bool { return net.probeCount(sample[0]) >= 3 })
	for _, s := range sample[1:] {
		if n := net.probeCount(s); n != 0 {
			t.Fatalf("Service %d probed %d times before the first answered", s.Index, n)
		}
	}

	// The first answers, the third does not yet: the round finds it, and it is watched.
	net.program(sample[0], sample[1])
	poll.Until(t, "the third Service to be probed", func() bool { return net.probeCount(sample[2]) >= 2 })
	select {
	case <-done:
		t.Fatal("waitProbes returned before every Service answered")
	default:
	}
	programmed := time.Now()
	net.program(sample[2])
	at := <-done
	if at.Before(programmed) {
		t.Errorf("returned a time %v before the last Service was programmed", programmed.Sub(at))
	}
}

func TestWaitProbesEndsWithItsContext(t *testing.T) {
	net := newFakeNetwork()
	ctx, cancel := context.WithCancel(context.Background())
	svc := &Svc{}
	done := make(chan time.Time, 1)
	go func() { done <- waitProbes(ctx, net.probe, []*Svc{svc}) }()
	poll.Until(t, "a probe", func() bool { return net.probeCount(svc) > 0 })
	cancel()
	if at := <-done; !at.IsZero() {
		t.Errorf("returned %v after its context ended, want the zero time", at)
	}
}

// fakeCounts is a count function whose reads block until the test releases them,
// each returning the count current when it was released.
type fakeCounts struct {
	started chan chan int // a started read, to release with a count
}

func (f *fakeCounts) count(ctx context.Context) (int, error) {
	release := make(chan int, 1)
	select {
	case f.started <- release:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	select {
	case n := <-release:
		return n, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func TestWaitElementsDoesNotWaitForAStaleDump(t *testing.T) {
	counts := &fakeCounts{started: make(chan chan int)}
	probed := make(chan struct{})
	type result struct {
		at   time.Time
		last elementCount
	}
	done := make(chan result, 1)
	go func() {
		at, last := waitElements(context.Background(), counts.count, 10, probed)
		done <- result{at, last}
	}()

	// A first read answers 3; a second (after the pause) is in flight, stale, when
	// the probes all answer.
	(<-counts.started) <- 3
	stale := <-counts.started
	close(probed)
	// A new reader starts at once, beside the stale one, and sees every Service.
	select {
	case fresh := <-counts.started:
		fresh <- 10
	case <-time.After(10 * time.Second):
		t.Fatal("no new read started within 10s of the probes answering; waiting for the stale one")
	}
	r := <-done
	if r.at.IsZero() || r.last.n != 10 {
		t.Fatalf("waitElements = %v, %+v; want a time and the count 10", r.at, r.last)
	}
	stale <- 3 // the stale read may end now; nobody waits for it
}

func TestWaitElementsEndsWithItsContext(t *testing.T) {
	counts := &fakeCounts{started: make(chan chan int)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan elementCount, 1)
	go func() {
		_, last := waitElements(ctx, counts.count, 10, make(chan struct{}))
		done <- last
	}()
	(<-counts.started) <- 4
	cancel()
	last := <-done
	if last.n != 4 && !errors.Is(last.err, context.Canceled) {
		t.Errorf("last count = %+v, want 4 or the cancellation", last)
	}
}
