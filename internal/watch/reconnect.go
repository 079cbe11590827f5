package watch

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// ReconnectInterval is how often, at most, the client tries to reach an API server
// it cannot connect to, counting every waiting request of the process together.
const ReconnectInterval = time.Second

// reconnectReminder is how often a continuing outage is logged again.
const reconnectReminder = 30 * time.Second

// reconnectTransport sits under client-go's authentication wrappers (as the rest
// config's WrapTransport) and retries a GET whose connection could not be made at
// all, until the API server accepts connections again or the request's context
// ends.
//
// Why: when the API server cannot be reached, a reflector backs off exponentially
// to a ceiling of 30 s (client-go's from 0.8 s with as much again of jitter;
// RelistBackoff from 0.1 s, which reaches the ceiling in under a minute of
// failures). After a 60 s outage a watch is therefore resumed up to 30-60 s after
// the server returns, and every change made meanwhile waits that long to be
// programmed (issue 16, scenario 2: 51 to 78 s for upstream, the same for kproxy
// before this). Here the reflectors never see the refused connections: their
// requests wait, and go again as soon as any request of the process gets through,
// within about ReconnectInterval of the server's return.
//
// The load on a returning API server stays bounded: retries of all waiting
// requests are spread ReconnectInterval apart process-wide (one connection
// attempt a second per node, about what the reflectors' first back-off steps
// cost), and only connections that failed to open are retried, so the server
// never sees a request twice. Any answer, an error status included, ends the
// wait; errors the server sends back (429 included, with its Retry-After) reach
// client-go as before. Requests other than GET fail at once, as without this.
type reconnectTransport struct {
	next     http.RoundTripper
	interval time.Duration
	clock    clock.Clock
	logger   klog.Logger

	// down is set while the server is unreachable (the fast path of RoundTrip).
	down atomic.Bool

	mu sync.Mutex
	// back is closed when a request gets through after an outage; nil when the
	// server is reachable.
	back chan struct{}
	// since is when the outage was first seen, and logged when it was last said.
	since, logged time.Time
	// nextTry is the earliest time of the next retry of any waiting request.
	nextTry time.Time
}

func newReconnectTransport(next http.RoundTripper, logger klog.Logger, clk clock.Clock, interval time.Duration) *reconnectTransport {
	return &reconnectTransport{next: next, interval: interval, clock: clk, logger: logger}
}

// RoundTrip implements http.RoundTripper.
func (t *reconnectTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	for {
		resp, err := t.next.RoundTrip(req)
		if err == nil {
			if t.down.Load() {
				t.reachable()
			}
			return resp, nil
		}
		if req.Method != http.MethodGet || !connectFailed(err) {
			return nil, err
		}
		if t.wait(req.Context(), err) != nil {
			return nil, err
		}
	}
}

// connectFailed reports whether err says the connection could not be opened
// (refused, no route, dial timeout): nothing of the request was sent.
func connectFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// wait blocks until this request's turn to retry comes, or another request got
// through, or ctx ends (its error is returned).
func (t *reconnectTransport) wait(ctx context.Context, cause error) error {
	now := t.clock.Now()
	t.mu.Lock()
	if t.back == nil {
		t.back = make(chan struct{})
		t.since, t.logged = now, now
		t.down.Store(true)
		t.logger.Info("API server unreachable; requests wait and are retried until it answers",
			"err", cause, "retryInterval", t.interval)
	} else if now.Sub(t.logged) >= reconnectReminder {
		t.logged = now
		t.logger.Info("API server still unreachable", "for", now.Sub(t.since).Round(time.Second), "err", cause)
	}
	back := t.back
	// Up to a tenth of jitter, so that the nodes of a cluster drift apart.
	at := now.Add(t.interval + rand.N(t.interval/10+1))
	if at.Before(t.nextTry) {
		at = t.nextTry
	}
	t.nextTry = at.Add(t.interval)
	t.mu.Unlock()

	timer := t.clock.NewTimer(at.Sub(now))
	defer timer.Stop()
	select {
	case <-back:
		return nil
	case <-timer.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reachable ends an outage: every waiting request goes again at once.
func (t *reconnectTransport) reachable() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.back == nil {
		return
	}
	close(t.back)
	t.back = nil
	t.nextTry = time.Time{}
	t.down.Store(false)
	t.logger.Info("API server reachable again", "unreachableFor", t.clock.Since(t.since).Round(time.Millisecond))
}
