package prober

import (
	"maps"
	"slices"
	"time"
)

// maxBackends bounds the distinct replies a window records per target; further ones
// count under otherBackends (a reply is a hostname, but a misbehaving server could send
// anything).
const (
	maxBackends   = 64
	otherBackends = "(other)"
)

// result is one completed probe.
type result struct {
	start   time.Time
	backend string // the reply, on success
	err     error
}

// tracker is one target's probes: launched ones get a sequence number, completed ones
// wait in done until every earlier one has completed, and are then folded into the
// current window in launch (= start time) order. Not safe for concurrent use; the
// Prober locks.
type tracker struct {
	target   Target
	launched uint64            // sequence number of the next probe to launch
	next     uint64            // sequence number of the next probe to fold
	done     map[uint64]result // completed, not folded yet
	win      window
}

func newTracker(t Target, start time.Time) *tracker {
	return &tracker{target: t, done: map[uint64]result{}, win: newWindow(start)}
}

// launch assigns the next sequence number.
func (tr *tracker) launch() uint64 {
	seq := tr.launched
	tr.launched++
	return seq
}

// complete records the result of probe seq and folds every result that is now in
// order. It returns the transitions (failing <-> succeeding) the folding saw.
func (tr *tracker) complete(seq uint64, r result) []Transition {
	if seq < tr.next {
		return nil // already folded: a duplicate
	}
	tr.done[seq] = r
	var ts []Transition
	for {
		r, ok := tr.done[tr.next]
		if !ok {
			return ts
		}
		delete(tr.done, tr.next)
		tr.next++
		if t, ok := tr.win.fold(r); ok {
			t.Target = tr.target
			ts = append(ts, t)
		}
	}
}

// summary is the current window up to end.
func (tr *tracker) summary(end time.Time) TargetSummary {
	s := tr.win.summary(end)
	s.Target = tr.target.String()
	s.Pending = int(tr.launched - tr.next)
	return s
}

// reset starts a new window at start; the probes not folded yet, and whether the
// target is in an outage, carry over to it.
func (tr *tracker) reset(start time.Time) {
	tr.win = tr.win.next(start)
}

// Transition is a target starting to fail (OK false, Err the first failure) or
// recovering (OK true, Outage how long no probe succeeded), in the order probes were
// launched.
type Transition struct {
	Target Target
	Time   time.Time // the probe's start
	OK     bool
	Err    error
	Outage time.Duration
}

// window is the folded state of one target in one window. Its methods are pure.
type window struct {
	start       time.Time
	attempts    int
	successes   int
	failures    int
	errs        []ProbeError
	lastErr     *ProbeError
	backends    map[string]int
	lastOK      time.Time // start of the last success, in this window or an earlier one; Run's start before any
	lastSuccess time.Time // start of the last success in this window (zero if none)
	failing     bool      // a probe failed since lastOK
	longest     Outage
}

func newWindow(start time.Time) window {
	return window{start: start, lastOK: start, backends: map[string]int{}}
}

// next is the window after w, starting at start: outages are measured from the last
// success, whichever window it was in, and one in progress continues.
func (w window) next(start time.Time) window {
	n := newWindow(start)
	n.lastOK, n.failing = w.lastOK, w.failing
	return n
}

// fold adds one result, in launch order. It reports a transition when the target
// started failing or recovered.
func (w *window) fold(r result) (Transition, bool) {
	w.attempts++
	if r.err != nil {
		w.failures++
		e := ProbeError{Time: r.start, Error: r.err.Error()}
		if len(w.errs) < MaxErrorSamples {
			w.errs = append(w.errs, e)
		}
		w.lastErr = &e
		if w.failing {
			return Transition{}, false
		}
		w.failing = true
		return Transition{Time: r.start, Err: r.err}, true
	}
	w.successes++
	b := r.backend
	if _, ok := w.backends[b]; !ok && len(w.backends) >= maxBackends {
		b = otherBackends
	}
	w.backends[b]++
	w.lastSuccess = r.start
	var t Transition
	recovered := false
	if w.failing {
		d := r.start.Sub(w.lastOK)
		if d > time.Duration(w.longest.Duration) {
			w.longest = Outage{Duration: Duration(d), From: w.lastOK, To: r.start}
		}
		w.failing = false
		t, recovered = Transition{Time: r.start, OK: true, Outage: d}, true
	}
	if r.start.After(w.lastOK) {
		w.lastOK = r.start
	}
	return t, recovered
}

// summary is the window as of end (an open outage counts up to end).
func (w window) summary(end time.Time) TargetSummary {
	s := TargetSummary{
		Attempts:      w.attempts,
		Successes:     w.successes,
		Failures:      w.failures,
		FirstErrors:   slices.Clone(w.errs),
		LongestOutage: w.longest,
		OutageOpen:    w.failing,
		LastSuccess:   w.lastSuccess,
	}
	if w.lastErr != nil {
		e := *w.lastErr
		s.LastError = &e
	}
	if len(w.backends) > 0 {
		s.Backends = maps.Clone(w.backends)
	}
	if w.failing {
		if d := end.Sub(w.lastOK); d > time.Duration(s.LongestOutage.Duration) {
			s.LongestOutage = Outage{Duration: Duration(d), From: w.lastOK, To: end, Open: true}
		}
	}
	return s
}
