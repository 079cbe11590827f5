package dptest

import (
	"context"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/drift"
)

// RunDriftChecks runs a proxier's RunDriftChecks until the test ends (then
// fails the test if it returned an error) and returns the channel its trigger
// signals: a drift check found differences and asked for the sync that repairs
// them.
func RunDriftChecks(t *testing.T, run func(ctx context.Context, trigger func()) error) <-chan struct{} {
	t.Helper()
	triggered := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, func() {
			select {
			case triggered <- struct{}{}:
			default:
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunDriftChecks: %v", err)
		}
	})
	return triggered
}

// WaitTriggered waits, at most 10 s, until a drift check triggers a sync.
func WaitTriggered(t *testing.T, triggered <-chan struct{}) {
	t.Helper()
	select {
	case <-triggered:
	case <-time.After(10 * time.Second):
		t.Fatal("the drift check did not trigger a sync within 10 s of falling due")
	}
}

// Differences makes a comparison with verify (a proxier's Verify) and returns
// its differences as text, failing the test on an error or when the report
// counts more than it lists.
func Differences(t *testing.T, verify func(context.Context) (*drift.Report, error)) []string {
	t.Helper()
	r, err := verify(context.Background())
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	out := make([]string, 0, len(r.Differences))
	for _, d := range r.Differences {
		out = append(out, d.String())
	}
	if r.Count != len(out) {
		t.Fatalf("Verify counted %d differences and listed %d", r.Count, len(out))
	}
	return out
}
