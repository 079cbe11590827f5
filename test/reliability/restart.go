package reliability

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/kproxy/kproxy/bench"
	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
)

// RestartConfig sizes scenario 1.
type RestartConfig struct {
	Services int // bulk Services loaded (besides the probe Service)
	Restarts int // restarts with SIGTERM, then as many with SIGKILL
}

// exitTimeout bounds waiting for a signalled proxy to exit.
const exitTimeout = 30 * time.Second

// settleAnswers is how many answered probes every stream must see after a scenario's
// last disruption before the runner stops: about 2 s of traffic on the final state.
const settleAnswers = 25

// RunRestarts is scenario 1: the proxy restarted cfg.Restarts times with SIGTERM, then
// cfg.Restarts times with SIGKILL, each new instance started once the previous one
// exited and the next signal sent once it has synced, under probes.
func RunRestarts(ctx context.Context, w *World, p bench.Proxy, mode string, cfg RestartConfig) (Result, error) {
	res := Result{Scenario: fmt.Sprintf("1. restarts, %d Services", cfg.Services), Proxy: p.Name, Mode: mode}
	err := runScenario(ctx, w, p, mode, cfg.Services, &res, func(r *scenarioRun) (string, error) {
		var syncs []time.Duration
		var exits []string
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			for range cfg.Restarts {
				next, d, exit, err := restartOnce(ctx, w.Lab, r.runner, r.px, p, mode, sig)
				r.px = next
				if err != nil {
					return restartNotes(cfg, syncs, exits), err
				}
				syncs = append(syncs, d)
				if exit != "" {
					exits = append(exits, exit)
				}
			}
		}
		return restartNotes(cfg, syncs, exits), nil
	})
	return res, err
}

// restartOnce marks a disruption in runner, signals px, waits for it to exit, and starts p again until it has
// synced; it returns the new proxy, its start-to-synced time, and how the old one
// exited when a SIGTERM did not end it with status 0.
func restartOnce(ctx context.Context, l *lab.Lab, runner *Runner, px *proxytest.Proxy, p bench.Proxy, mode string, sig syscall.Signal) (*proxytest.Proxy, time.Duration, string, error) {
	runner.Disrupted()
	if err := px.Process.Signal(sig); err != nil {
		return px, 0, "", fmt.Errorf("signal %s: %w", sig, err)
	}
	select {
	case <-px.Process.Done():
	case <-time.After(exitTimeout):
		return px, 0, "", fmt.Errorf("%s did not exit within %s of %s", p.Name, exitTimeout, sig)
	case <-ctx.Done():
		return px, 0, "", ctx.Err()
	}
	var exit string
	if _, werr := px.Process.Exited(); sig == syscall.SIGTERM && werr != nil {
		exit = werr.Error()
	}
	next, d, err := startSynced(ctx, l, p, mode)
	if err != nil {
		return px, 0, exit, err
	}
	return next, d, exit, nil
}

func restartNotes(cfg RestartConfig, syncs []time.Duration, exits []string) string {
	s := fmt.Sprintf("%d restarts (SIGTERM, then SIGKILL, %d each)", len(syncs), cfg.Restarts)
	if len(syncs) > 0 {
		sorted := slices.Clone(syncs)
		slices.Sort(sorted)
		s += fmt.Sprintf("; start to first sync: median %s, max %s", fmtDur(sorted[len(sorted)/2]), fmtDur(sorted[len(sorted)-1]))
	}
	if len(exits) > 0 {
		s += fmt.Sprintf("; after SIGTERM %d exited with %q", len(exits), exits[0])
	}
	return s
}
