package reliability

import (
	"context"
	"testing"
	"time"

	"github.com/kproxy/kproxy/bench"
)

// TestRefusedTransaction is scenario 3's refused transaction under probes, for both
// proxies in both modes.
func TestRefusedTransaction(t *testing.T) {
	cfg := RefusalConfig{Services: services()}
	// The frame's start and settling, and the waits' bounds.
	runEach(t, 3*time.Minute+3*refusalBound+refusalCountBound, func(ctx context.Context, w *World, p bench.Proxy, mode string) (Result, error) {
		return RunRefusedTransaction(ctx, w, p, mode, cfg)
	})
}
