package syncer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// SyncFunc is the work a Runner schedules. wrote reports whether the run sent anything
// to the kernel, accepted or not: only such a run (or a failed one) makes the next run
// wait minInterval, since minInterval exists to bound kernel writes under churn.
type SyncFunc func(ctx context.Context) (wrote bool, err error)

// Runner calls a SyncFunc with bounded frequency; see the package documentation.
type Runner struct {
	name string
	fn   SyncFunc

	minInterval   time.Duration
	retryInterval time.Duration
	maxInterval   time.Duration

	clock clock.Clock

	// failures counts consecutive failed runs, for the retry back-off.
	failures int

	// requests holds at most one pending Run() request: that is what coalesces bursts.
	requests chan struct{}
	looping  atomic.Bool
}

// Option customises a Runner.
type Option func(*Runner)

// WithClock makes the Runner use c for all timers (tests pass a FakeClock).
func WithClock(c clock.Clock) Option {
	return func(r *Runner) { r.clock = c }
}

// NewRunner returns a Runner named name (used in logs) for fn. It returns an error
// when an interval is negative, maxInterval is zero, or maxInterval < minInterval.
// A retryInterval of 0 or above maxInterval means "retry after maxInterval".
func NewRunner(name string, fn SyncFunc, minInterval, retryInterval, maxInterval time.Duration, opts ...Option) (*Runner, error) {
	if fn == nil {
		return nil, fmt.Errorf("runner %q: nil sync function", name)
	}
	if minInterval < 0 || retryInterval < 0 || maxInterval <= 0 {
		return nil, fmt.Errorf("runner %q: intervals must be non-negative and maxInterval positive (min %v, retry %v, max %v)",
			name, minInterval, retryInterval, maxInterval)
	}
	if maxInterval < minInterval {
		return nil, fmt.Errorf("runner %q: maxInterval (%v) must be >= minInterval (%v)", name, maxInterval, minInterval)
	}
	r := &Runner{
		name:          name,
		fn:            fn,
		minInterval:   minInterval,
		retryInterval: retryInterval,
		maxInterval:   maxInterval,
		clock:         clock.RealClock{},
		requests:      make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(r)
	}
	return r, nil
}

// Run requests a sync as soon as the bounds allow. It never blocks; while a request
// is already pending, further calls have no effect until it has been served.
func (r *Runner) Run() {
	select {
	case r.requests <- struct{}{}:
	default:
	}
}

// ErrLoopRunning is returned by Loop when the Runner's loop is already running.
var ErrLoopRunning = errors.New("runner loop already running")

// Loop serves Run requests and the periodic/retry timer until ctx is cancelled, then
// returns nil. See the package documentation for the timing contract.
func (r *Runner) Loop(ctx context.Context) error {
	if !r.looping.CompareAndSwap(false, true) {
		return fmt.Errorf("runner %q: %w", r.name, ErrLoopRunning)
	}
	defer r.looping.Store(false)

	logger := klog.FromContext(ctx).WithValues("runner", r.name)
	logger.V(3).Info("Sync loop running")
	defer logger.V(3).Info("Sync loop stopping")

	// nextRun fires at maxInterval after a run, or after the back-off delay
	// (retryDelay, at most retryInterval) after a failed one.
	nextRun := r.clock.NewTimer(r.maxInterval)
	defer nextRun.Stop()

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-nextRun.C():
		case <-r.requests:
		}

		// Stopping the timer while fn runs keeps FakeClock's waiter count meaningful
		// for tests, and the drain keeps a stale expiry from causing a spurious run.
		stopAndDrain(nextRun)
		// A run starting now reads the state as it is now, so it also serves a
		// request made before it (when the timer won the select above); leaving
		// that request pending would cost one redundant run.
		select {
		case <-r.requests:
		default:
		}

		wrote, err := r.fn(ctx)

		next := r.maxInterval
		if err != nil {
			r.failures++
			next = min(next, r.retryDelay())
			logger.Error(err, "Sync failed; retrying", "retryIn", next, "consecutiveFailures", r.failures)
		} else {
			r.failures = 0
		}
		nextRun.Reset(next)

		// A run that wrote nothing (a periodic run, or one whose changes rendered to
		// nothing) does not delay the next: a change arriving just after it is
		// applied at once. A failed run counts as a write, so that a persistent
		// failure cannot turn a stream of events into back-to-back attempts.
		if r.minInterval > 0 && (wrote || err != nil) {
			cooldown := r.clock.NewTimer(r.minInterval)
			select {
			case <-ctx.Done():
				cooldown.Stop()
				return nil
			case <-cooldown.C():
			}
		} else if ctx.Err() != nil {
			return nil
		}
	}
}

// FirstRetryDelay is the wait before retrying a failed run the first time; it doubles
// with each consecutive failure up to the retry interval.
const FirstRetryDelay = time.Second

// retryDelay is the back-off after r.failures consecutive failures: FirstRetryDelay
// (or minInterval, if longer) doubling each time, capped at retryInterval.
func (r *Runner) retryDelay() time.Duration {
	limit := r.retryInterval
	if limit <= 0 {
		limit = r.maxInterval
	}
	delay := max(FirstRetryDelay, r.minInterval)
	for i := 1; i < r.failures && delay < limit; i++ {
		delay *= 2
	}
	return min(delay, limit)
}

func stopAndDrain(t clock.Timer) {
	if !t.Stop() {
		select {
		case <-t.C():
		default:
		}
	}
}
