package reliability

import (
	"context"
	"testing"
	"time"

	"github.com/kproxy/kproxy/bench"
)

// TestAPIServerOutage is scenario 2: the API server restarted and then unreachable
// under probes, a change made at each return.
func TestAPIServerOutage(t *testing.T) {
	// The short version restarts it twice; the full one three times, then keeps it
	// down for a minute (upstream's return after that outage waits out client-go's
	// reflector back-off, 30-60 s, see programmedBound).
	cfg := APIOutageConfig{Services: services(), Restarts: 2}
	if full() {
		cfg.Restarts, cfg.Down = 3, time.Minute
	}
	timeout := 5*time.Minute + time.Duration(cfg.Restarts+1)*time.Minute + cfg.Down
	runEach(t, timeout, func(ctx context.Context, w *World, p bench.Proxy, mode string) (Result, error) {
		return RunAPIServerOutage(ctx, w, p, mode, cfg)
	})
}
