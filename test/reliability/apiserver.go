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
// back programmed. kproxy's client retries a request that could not connect about
// every second, and all of them at once when one gets through (internal/watch's
// reconnectTransport), so its watches resume within about a second of the return.
// Upstream watches through client-go's reflectors alone, which retry a failed list
// or watch after an exponential back-off (0.8 s doubling up to 30 s, with up to
// 100% jitter): after an outage of a minute its first retry can come 30-60 s after
// the API server returns. That is reported in the notes; returnBound bounds it.
const programmedBound = 5 * time.Second

// relistDelay is the most client-go's reflector waits before it lists again after
// its n-th watch in a row that ended (0-based), which kproxy cannot shorten: a
// restarted API server ends every watch, and a watch resumed on it from the old
// resource version is refused as too old, so every return costs a relist after the
// reflector's back-off, which doubles from 0.8 s (plus up to 100% jitter) and is
// reset only after two minutes without one. Returns less than two minutes apart
// therefore wait 1.6, 3.2, 6.4, 12.8 s at most (measured: 1.1, 1.1, 3.3 and 7.9 s
// for kproxy over three restarts and an outage). client-go's shared informers do
// not let a caller set that back-off (its ReflectorOptions.Backoff is not exposed
// through them).
func relistDelay(n int) time.Duration {
	return min(time.Duration(1600<<n)*time.Millisecond, time.Minute)
}

// kproxyReturnBound is how soon kproxy must program a change after the API
// server's n-th return in a row (0-based): the 5 s for the first, and
// client-go's relist back-off on top of it for the later ones.
func kproxyReturnBound(n int) time.Duration {
	if n == 0 {
		return programmedBound
	}
	return programmedBound + relistDelay(n)
}

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
				if lag > kproxyReturnBound(i) {
					return apiOutageNotes(lags, health), fmt.Errorf("a Service created at the API server's return %d answered %s after it was ready; want at most %s",
						i+1, fmtDur(lag), kproxyReturnBound(i))
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
