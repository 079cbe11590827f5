package reliability

import (
	"context"
	"testing"
	"time"

	"github.com/kproxy/kproxy/bench"
)

// TestOddData is scenario 5: odd but valid API data under probes.
func TestOddData(t *testing.T) {
	cfg := OddConfig{Services: services()}
	runEach(t, 5*time.Minute, func(ctx context.Context, w *World, p bench.Proxy, mode string) (Result, error) {
		return RunOddData(ctx, w, p, mode, cfg)
	})
}
