package syncer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

const waitBound = 5 * time.Second

// result is what the test makes one call of fn return.
type result struct {
	wrote bool
	err   error
}

// harness runs a Runner whose fn hands each call to the test, which decides its result.
type harness struct {
	t      *testing.T
	clock  *clocktesting.FakeClock
	runner *Runner
	calls  chan chan result
	cancel context.CancelFunc
	done   chan error
}

func newHarness(t *testing.T, minInterval, retryInterval, maxInterval time.Duration) *harness {
	t.Helper()
	h := &harness{
		t:     t,
		clock: clocktesting.NewFakeClock(time.Unix(1000, 0)),
		calls: make(chan chan result),
		done:  make(chan error, 1),
	}
	fn := func(ctx context.Context) (bool, error) {
		reply := make(chan result)
		select {
		case h.calls <- reply:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		select {
		case res := <-reply:
			return res.wrote, res.err
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	r, err := NewRunner("test", fn, minInterval, retryInterval, maxInterval, WithClock(h.clock))
	if err != nil {
		t.Fatalf("NewRunner: %v", err)
	}
	h.runner = r
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- r.Loop(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-h.done:
			if err != nil {
				t.Errorf("Loop returned %v after cancel, want nil", err)
			}
		case <-time.After(waitBound):
			t.Errorf("Loop did not return after cancel")
		}
	})
	return h
}

// waitWaiters waits until the fake clock has n active timers: 1 means the loop is
// idle (only the next-run timer), 2 means it is cooling down after a run.
func (h *harness) waitWaiters(n int) {
	h.t.Helper()
	deadline := time.Now().Add(waitBound)
	for h.clock.Waiters() != n {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %d clock waiters, have %d", n, h.clock.Waiters())
		}
		time.Sleep(time.Millisecond)
	}
}

// expectCall waits for fn to be called and makes it return err, as a run that
// wrote to the kernel.
func (h *harness) expectCall(err error) {
	h.t.Helper()
	h.expectCallResult(result{wrote: true, err: err})
}

// expectCallResult waits for fn to be called and makes it return res.
func (h *harness) expectCallResult(res result) {
	h.t.Helper()
	select {
	case reply := <-h.calls:
		reply <- res
	case <-time.After(waitBound):
		h.t.Fatalf("fn was not called")
	}
}

// expectNoCall checks that fn is not being called; the caller must first have waited
// for a settled state (waitWaiters) so that the loop is blocked.
func (h *harness) expectNoCall() {
	h.t.Helper()
	select {
	case reply := <-h.calls:
		reply <- result{}
		h.t.Fatalf("fn called unexpectedly")
	default:
	}
}

func TestFirstRunIsImmediate(t *testing.T) {
	h := newHarness(t, time.Second, 10*time.Second, time.Hour)
	h.waitWaiters(1)
	h.expectNoCall() // the loop does not sync on its own at start
	h.runner.Run()
	h.expectCall(nil) // no clock step needed
}

func TestBurstsCoalesceAndMinInterval(t *testing.T) {
	h := newHarness(t, time.Second, 10*time.Second, time.Hour)
	h.waitWaiters(1)
	h.runner.Run()
	h.expectCall(nil)
	h.waitWaiters(2) // cooling down

	for range 5 {
		h.runner.Run()
	}
	h.expectNoCall()
	h.clock.Step(time.Second - time.Millisecond)
	h.waitWaiters(2)
	h.expectNoCall()

	h.clock.Step(time.Millisecond)
	h.expectCall(nil) // the burst ran exactly once, right at minInterval
	h.waitWaiters(2)
	h.clock.Step(time.Second)
	h.waitWaiters(1)
	h.expectNoCall()
}

func TestRequestDuringRunRunsOnceMore(t *testing.T) {
	h := newHarness(t, time.Second, 10*time.Second, time.Hour)
	h.waitWaiters(1)
	h.runner.Run()
	select {
	case reply := <-h.calls:
		h.runner.Run() // arrives while fn runs
		h.runner.Run()
		reply <- result{wrote: true}
	case <-time.After(waitBound):
		t.Fatal("fn was not called")
	}
	h.waitWaiters(2)
	h.expectNoCall()
	h.clock.Step(time.Second)
	h.expectCall(nil)
	h.waitWaiters(2)
	h.clock.Step(time.Second)
	h.waitWaiters(1)
	h.expectNoCall()
}

// A run that wrote nothing (the periodic run, or one whose changes rendered to
// nothing) leaves no cooldown: the change arriving right after it is applied at
// once, and a run that writes then bounds the next one as usual.
func TestRunThatWroteNothingHasNoCooldown(t *testing.T) {
	h := newHarness(t, time.Second, 10*time.Second, time.Hour)
	h.waitWaiters(1)
	h.runner.Run()
	h.expectCallResult(result{wrote: false})
	h.waitWaiters(1) // idle at once: no cooldown timer
	h.runner.Run()
	h.expectCall(nil) // no clock step needed
	h.waitWaiters(2)  // this one wrote: cooling down
	h.runner.Run()
	h.expectNoCall()
	h.clock.Step(time.Second)
	h.expectCallResult(result{wrote: false})
	h.waitWaiters(1)
	h.expectNoCall()
}

// A failed run cools down even if it reports no write, so that a persistent
// failure cannot turn a stream of events into back-to-back attempts.
func TestFailedRunCoolsDownEvenWithoutWrite(t *testing.T) {
	h := newHarness(t, time.Second, 10*time.Second, time.Hour)
	h.waitWaiters(1)
	h.runner.Run()
	h.expectCallResult(result{wrote: false, err: errors.New("boom")})
	h.waitWaiters(2)
	h.runner.Run()
	h.expectNoCall()
	h.clock.Step(time.Second)
	h.expectCall(nil)
}

func TestZeroMinIntervalHasNoCooldown(t *testing.T) {
	h := newHarness(t, 0, 10*time.Second, time.Hour)
	h.waitWaiters(1)
	for range 3 {
		h.runner.Run()
		h.expectCall(nil)
		h.waitWaiters(1)
	}
}

func TestMaxIntervalForcesRun(t *testing.T) {
	h := newHarness(t, time.Second, 10*time.Second, time.Hour)
	h.waitWaiters(1)
	h.clock.Step(time.Hour - time.Second)
	h.waitWaiters(1)
	h.expectNoCall()
	h.clock.Step(time.Second)
	h.expectCall(nil)

	// The period restarts from the end of the last run.
	h.waitWaiters(2)
	h.clock.Step(time.Second)
	h.waitWaiters(1)
	h.clock.Step(time.Hour - 2*time.Second)
	h.waitWaiters(1)
	h.expectNoCall()
	h.clock.Step(time.Second)
	h.expectCall(nil)
}

func TestRetryAfterError(t *testing.T) {
	h := newHarness(t, time.Second, 10*time.Second, time.Hour)
	h.waitWaiters(1)
	h.runner.Run()
	// Back-off: 1s, 2s, 4s, 8s, then capped at the retry interval (10s).
	wantDelays := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	h.expectCall(errors.New("boom"))
	for i, delay := range wantDelays {
		// minInterval (1s) cooldown, then the retry timer.
		h.waitWaiters(2)
		h.clock.Step(time.Second)
		if rest := delay - time.Second; rest > 0 {
			h.waitWaiters(1)
			h.clock.Step(rest - time.Millisecond)
			h.waitWaiters(1)
			h.expectNoCall()
			h.clock.Step(time.Millisecond)
		}
		if i == len(wantDelays)-1 {
			h.expectCall(nil)
		} else {
			h.expectCall(fmt.Errorf("failure %d", i+2))
		}
	}

	// After success, the next forced run is at maxInterval, not retryInterval.
	h.waitWaiters(2)
	h.clock.Step(time.Second)
	h.waitWaiters(1)
	h.clock.Step(20 * time.Second)
	h.waitWaiters(1)
	h.expectNoCall()
}

func TestSuccessfulRunCancelsRetry(t *testing.T) {
	h := newHarness(t, time.Second, 10*time.Second, time.Hour)
	h.waitWaiters(1)
	h.runner.Run()
	h.expectCall(errors.New("boom"))
	h.waitWaiters(2)
	h.runner.Run()
	h.clock.Step(time.Second)
	h.expectCall(nil)
	h.waitWaiters(2)
	h.clock.Step(time.Second)
	h.waitWaiters(1)
	h.clock.Step(30 * time.Second)
	h.waitWaiters(1)
	h.expectNoCall()
}

func TestRetryCappedByMaxInterval(t *testing.T) {
	h := newHarness(t, 0, time.Hour, 5*time.Second)
	h.waitWaiters(1)
	h.runner.Run()
	h.expectCall(errors.New("boom"))
	h.waitWaiters(1)
	h.clock.Step(5 * time.Second)
	h.expectCall(nil)
}

func TestLoopStopsOnCancel(t *testing.T) {
	for _, name := range []string{"idle", "cooldown"} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, time.Second, time.Second, time.Hour)
			h.waitWaiters(1)
			if name == "cooldown" {
				h.runner.Run()
				h.expectCall(nil)
				h.waitWaiters(2)
			}
			h.cancel()
			select {
			case err := <-h.done:
				if err != nil {
					t.Fatalf("Loop returned %v, want nil", err)
				}
				h.done <- nil // for the cleanup
			case <-time.After(waitBound):
				t.Fatal("Loop did not stop")
			}
		})
	}
}

func TestLoopOnlyOnce(t *testing.T) {
	h := newHarness(t, 0, time.Second, time.Hour)
	h.waitWaiters(1)
	if err := h.runner.Loop(context.Background()); !errors.Is(err, ErrLoopRunning) {
		t.Fatalf("second Loop = %v, want ErrLoopRunning", err)
	}
}

func TestNewRunnerValidates(t *testing.T) {
	fn := func(context.Context) (bool, error) { return false, nil }
	tests := []struct {
		name               string
		fn                 SyncFunc
		minI, retryI, maxI time.Duration
		wantErr            bool
	}{
		{"ok", fn, time.Second, 30 * time.Second, time.Hour, false},
		{"no min", fn, 0, 0, time.Hour, false},
		{"max below min", fn, time.Hour, time.Second, time.Minute, true},
		{"zero max", fn, 0, time.Second, 0, true},
		{"negative", fn, -1, time.Second, time.Hour, true},
		{"nil fn", nil, 0, time.Second, time.Hour, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewRunner("x", tc.fn, tc.minI, tc.retryI, tc.maxI)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
}
