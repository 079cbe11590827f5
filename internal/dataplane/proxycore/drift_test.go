package proxycore

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kproxy/kproxy/internal/drift"
	"github.com/kproxy/kproxy/internal/model"
)

func newDriftCore(t *testing.T) (*Core, *clocktesting.FakePassiveClock) {
	t.Helper()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC))
	c, err := New("test", &Config{Family: v1.IPv4Protocol, State: model.NewState(v1.IPv4Protocol, "node-a"), Clock: clk}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return c, clk
}

// A sync that begins while a comparison reads the kernel cancels the read: the
// comparison is inconclusive (made again later) and the sync does not compete
// with it.
func TestComparisonGivesWayToSync(t *testing.T) {
	c, _ := newDriftCore(t)
	reading := make(chan struct{})
	compared := false
	dc := &DriftComparison[int]{
		Read: func(ctx context.Context) (int, error) {
			close(reading)
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(10 * time.Second):
				return 0, errors.New("the read was not cancelled within 10s of the sync beginning")
			}
		},
		Compare: func(context.Context, int, *drift.Report) error { compared = true; return nil },
	}
	errc := make(chan error, 1)
	go func() {
		_, err := compareOnce(context.Background(), c, dc, nil)
		errc <- err
	}()
	select {
	case <-reading:
	case <-time.After(10 * time.Second):
		t.Fatal("the comparison did not start reading within 10s")
	}
	c.Begin(context.Background())
	if err := <-errc; !errors.Is(err, ErrInconclusive) {
		t.Fatalf("comparison interrupted by a sync: got %v, want ErrInconclusive", err)
	}
	if compared {
		t.Error("an interrupted read was compared")
	}
	if c.driftRead.Load() != nil {
		t.Error("the cancelled read is still registered")
	}
}

// A sync that wants the lock while a comparison compares under it does not wait
// for the comparison to end: the comparison gives way (inconclusive) and releases
// the lock.
func TestComparisonUnderLockGivesWayToSync(t *testing.T) {
	c, _ := newDriftCore(t)
	comparing := make(chan struct{})
	dc := &DriftComparison[int]{
		Read: func(context.Context) (int, error) { return 0, nil },
		Compare: func(ctx context.Context, _ int, _ *drift.Report) error {
			close(comparing)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Second):
				return errors.New("the comparison was not cancelled within 10s of a sync wanting the lock")
			}
		},
	}
	errc := make(chan error, 1)
	go func() {
		_, err := compareOnce(context.Background(), c, dc, nil)
		errc <- err
	}()
	select {
	case <-comparing:
	case <-time.After(10 * time.Second):
		t.Fatal("the comparison did not start comparing within 10s")
	}
	locked := make(chan struct{})
	go func() {
		c.LockForSync()
		close(locked)
		c.UnlockSync()
	}()
	select {
	case <-locked:
	case <-time.After(10 * time.Second):
		t.Fatal("the sync did not get the lock within 10s")
	}
	if err := <-errc; !errors.Is(err, ErrInconclusive) {
		t.Fatalf("comparison interrupted under the lock by a sync: got %v, want ErrInconclusive", err)
	}
}

// A sync that announced itself before the comparison started reading (so that
// it could not cancel the read) still makes the comparison inconclusive.
func TestComparisonAfterAnnouncedSyncIsInconclusive(t *testing.T) {
	c, clk := newDriftCore(t)
	dc := &DriftComparison[int]{
		Read: func(context.Context) (int, error) {
			// What yieldToSync leaves when it ran just before the read's
			// context was registered: a later lastBegin and no cancellation.
			clk.SetTime(clk.Now().Add(time.Millisecond))
			c.lastBegin.Store(clk.Now().UnixNano())
			return 0, nil
		},
		Compare: func(context.Context, int, *drift.Report) error {
			return errors.New("compared although a sync began during the read")
		},
	}
	if _, err := compareOnce(context.Background(), c, dc, nil); !errors.Is(err, ErrInconclusive) {
		t.Fatalf("got %v, want ErrInconclusive", err)
	}
}

// The caller's own cancellation is not mistaken for a sync's.
func TestComparisonReturnsReadErrorsOfItsCaller(t *testing.T) {
	c, _ := newDriftCore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dc := &DriftComparison[int]{
		Read:    func(ctx context.Context) (int, error) { return 0, ctx.Err() },
		Compare: func(context.Context, int, *drift.Report) error { return nil },
	}
	if _, err := compareOnce(ctx, c, dc, nil); !errors.Is(err, context.Canceled) || errors.Is(err, ErrInconclusive) {
		t.Fatalf("got %v, want the caller's context.Canceled", err)
	}
}

// Background comparisons start only DriftQuiet after the last sync began.
func TestQuietAfterSync(t *testing.T) {
	c, clk := newDriftCore(t)
	now := clk.Now()
	if !c.quiet(now) {
		t.Error("not quiet before any sync")
	}
	c.Begin(context.Background())
	for _, tc := range []struct {
		after time.Duration
		want  bool
	}{{0, false}, {DriftQuiet - time.Millisecond, false}, {DriftQuiet, true}, {time.Minute, true}} {
		if got := c.quiet(now.Add(tc.after)); got != tc.want {
			t.Errorf("quiet %s after a sync began = %v, want %v", tc.after, got, tc.want)
		}
	}
}
