package reliability

import (
	"context"
	"testing"
	"time"

	"github.com/kproxy/kproxy/bench"
)

// TestRestarts is scenario 1: restarts in a row with SIGTERM and SIGKILL under probes.
func TestRestarts(t *testing.T) {
	cfg := RestartConfig{Services: services(), Restarts: restarts()}
	// A restart takes up to ~15 s (upstream, iptables mode, 1,000 Services, loaded
	// machine): a generous bound per run.
	timeout := 5*time.Minute + time.Duration(2*cfg.Restarts)*30*time.Second
	runEach(t, timeout, func(ctx context.Context, w *World, p bench.Proxy, mode string) (Result, error) {
		return RunRestarts(ctx, w, p, mode, cfg)
	})
}
