package reliability

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kproxy/kproxy/bench"
	"github.com/kproxy/kproxy/test/e2e/proxytest"
)

// APIOutageConfig sizes scenario 2.
type APIOutageConfig struct {
	Services int           // bulk Services loaded (besides the probe Service)
	Restarts int           // API server restarts in a row
	Down     time.Duration // then the API server is unreachable this long
}

// programmedBound is how soon the issue wants a change made once the API server is
// back programmed, and kproxy is held to it on every return. Its client retries a
// request that could not connect about every second, and all of them at once when
// one gets through (internal/watch's reconnectTransport), and its informers relist
// after a back-off of 0.1 s doubling (watch.RelistBackoff), where client-go's
// doubles from 0.8 s: a restarted API server refuses a resumed watch as too old, so
// every return costs a relist, and returns less than two minutes apart compound
// the back-off. Upstream watches through client-go's shared informers alone: their
// reflectors retry a failed list or watch after 0.8 s doubling up to 30 s, with up
// to 100% jitter, so after an outage of a minute the first retry can come 30-60 s
// after the API server returns. That is reported in the notes; returnBound bounds
// it.
const programmedBound = 5 * time.Second

// returnBound bounds waiting for a change made at the API server's return to be
// programmed: the reflector's longest retry interval (30 s, plus up to 100% jitter)
// and a list.
const returnBound = 90 * time.Second

// RunAPIServerOutage is scenario 2: the API server restarted cfg.Restarts times, then
// (when cfg.Down is set) stopped for cfg.Down, under probes. The probe streams say whether traffic kept
// flowing on the last state; after each return a new Service is created, and the
// time from the API server being ready to its ClusterIP answering says how soon the
// proxy's watches came back (the bound: 5 s); the proxy's /healthz is read at
// the end of the outage. Changes cannot be made while the API server is down: "what
// changed meanwhile" is what changed before the proxy's watches resumed.
func RunAPIServerOutage(ctx context.Context, w *World, p bench.Proxy, mode string, cfg APIOutageConfig) (Result, error) {
	res := Result{Scenario: fmt.Sprintf("2. API server: %d restarts, then down %s; %d Services", cfg.Restarts, fmtDur(cfg.Down), cfg.Services), Proxy: p.Name, Mode: mode}
	err := runScenario(ctx, w, p, mode, cfg.Services, &res, func(r *scenarioRun) (string, error) {
		returns := cfg.Restarts
		if cfg.Down > 0 {
			returns++ // the outage, after the restarts
		}
		var lags []time.Duration
		var health string
		for i := range returns {
			down := time.Duration(0)
			if i == cfg.Restarts {
				down = cfg.Down
			}
			lag, h, err := apiServerDown(ctx, r, fmt.Sprintf("rel-api-%s-%s-%d", mode, p.Name, i), down)
			if h != "" {
				health = h
			}
			if err != nil {
				return apiOutageNotes(lags, health), err
			}
			lags = append(lags, lag)
		}
		if p.Name == "kproxy" {
			for i, lag := range lags {
				if lag > programmedBound {
					return apiOutageNotes(lags, health), fmt.Errorf("a Service created at the API server's return %d answered %s after it was ready; want at most %s",
						i+1, fmtDur(lag), programmedBound)
				}
			}
		}
		return apiOutageNotes(lags, health), nil
	})
	return res, err
}

// apiServerDown stops the API server, keeps it down for down, reads the proxy's
// /healthz (when down > 0), starts it again, creates the Service name, and returns
// how long after the API server was ready the Service's ClusterIP answered.
func apiServerDown(ctx context.Context, r *scenarioRun, name string, down time.Duration) (time.Duration, string, error) {
	l := r.w.Lab
	r.runner.Disrupted()
	if err := l.StopAPIServer(); err != nil {
		return 0, "", err
	}
	var health string
	if down > 0 {
		// The outage itself: the scenario's length, not a wait for a condition.
		select {
		case <-time.After(down):
		case <-ctx.Done():
			return 0, "", ctx.Err()
		}
		code, body, err := r.px.Get(ctx, proxytest.HealthzURL)
		health = fmt.Sprintf("%d %s", code, strings.TrimSpace(body))
		if err != nil {
			health = err.Error()
		}
	}
	if err := l.StartAPIServer(ctx); err != nil {
		return 0, health, err
	}
	ready := time.Now()
	if err := r.w.serviceAnswersWithin(ctx, name, "a Service created at the API server's return", returnBound); err != nil {
		return 0, health, err
	}
	return time.Since(ready), health, nil
}

func apiOutageNotes(lags []time.Duration, health string) string {
	s := fmt.Sprintf("%d returns of the API server", len(lags))
	if len(lags) > 0 {
		parts := make([]string, len(lags))
		for i, d := range lags {
			parts[i] = fmtDur(d)
		}
		s += fmt.Sprintf("; a Service created on each return answered %s after the API server was ready", strings.Join(parts, ", "))
		if slices.Max(lags) > programmedBound {
			s += fmt.Sprintf(" (over the issue's %s)", programmedBound)
		}
	}
	if health != "" {
		s += "; /healthz at the end of the outage: " + health
	}
	return s
}
