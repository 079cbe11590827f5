package proxycore

import (
	"context"
	"errors"
	"testing"

	"github.com/kproxy/kproxy/internal/drift"
)

// A full sync requested through the daemon-facing methods is taken by exactly one
// Sync.
func TestFullSyncRequestIsTakenOnce(t *testing.T) {
	c, _ := newDriftCore(t)
	if c.TakeFullSyncRequest() {
		t.Fatal("a full sync request before any was made")
	}
	c.Common().RequestFullSync()
	c.Common().RequestFullSync()
	if !c.TakeFullSyncRequest() {
		t.Fatal("RequestFullSync did not reach the next sync")
	}
	if c.TakeFullSyncRequest() {
		t.Fatal("one request was taken twice")
	}
}

// A sync that wrote while a comparison read the kernel makes the comparison
// inconclusive: it would compare the old kernel with the new applied state.
func TestWriteDuringReadIsInconclusive(t *testing.T) {
	c, _ := newDriftCore(t)
	compared := false
	dc := &DriftComparison[int]{
		Read: func(context.Context) (int, error) {
			c.WithSyncLock(c.CountWrite)
			return 0, nil
		},
		Compare: func(context.Context, int, *drift.Report) error { compared = true; return nil },
	}
	if _, err := compareOnce(context.Background(), c, dc, nil); !errors.Is(err, ErrInconclusive) {
		t.Fatalf("comparison across a write: got %v, want ErrInconclusive", err)
	}
	if compared {
		t.Error("Compare ran across a write")
	}
	if _, err := compareOnce(context.Background(), c, &DriftComparison[int]{
		Read:    func(context.Context) (int, error) { return 0, nil },
		Compare: func(context.Context, int, *drift.Report) error { compared = true; return nil },
	}, nil); err != nil || !compared {
		t.Fatalf("comparison with no write: err %v, compared %v; want nil, true", err, compared)
	}
}
