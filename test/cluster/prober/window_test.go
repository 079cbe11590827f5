package prober

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func ok(ms int, backend string) result { return result{start: at(ms), backend: backend} }

func fail(ms int, msg string) result { return result{start: at(ms), err: errors.New(msg)} }

// foldAll folds rs into a window starting at t0, in order.
func foldAll(rs ...result) window {
	w := newWindow(t0)
	for _, r := range rs {
		w.fold(r)
	}
	return w
}

func TestWindowOutage(t *testing.T) {
	for _, tc := range []struct {
		name     string
		results  []result
		end      int
		want     Outage
		failures int
	}{
		{
			name:    "all succeed",
			results: []result{ok(0, "a"), ok(50, "b"), ok(100, "a")},
			end:     150,
		},
		{
			name:     "from the last success before the failure to the next success",
			results:  []result{ok(0, "a"), ok(50, "a"), fail(100, "x"), fail(150, "x"), ok(200, "a"), ok(250, "a")},
			end:      300,
			want:     Outage{Duration: Duration(150 * time.Millisecond), From: at(50), To: at(200)},
			failures: 2,
		},
		{
			name:     "the longest of two",
			results:  []result{ok(0, "a"), fail(50, "x"), ok(100, "a"), fail(150, "x"), fail(200, "x"), fail(250, "x"), ok(300, "a"), fail(350, "y"), ok(400, "a")},
			end:      450,
			want:     Outage{Duration: Duration(200 * time.Millisecond), From: at(100), To: at(300)},
			failures: 5,
		},
		{
			name:     "open at the end counts up to the end",
			results:  []result{ok(0, "a"), ok(50, "a"), fail(100, "x")},
			end:      1300,
			want:     Outage{Duration: Duration(1250 * time.Millisecond), From: at(50), To: at(1300), Open: true},
			failures: 1,
		},
		{
			name:     "an open outage shorter than a closed one",
			results:  []result{ok(0, "a"), fail(50, "x"), fail(100, "x"), fail(150, "x"), ok(200, "a"), fail(250, "x")},
			end:      260,
			want:     Outage{Duration: Duration(200 * time.Millisecond), From: at(0), To: at(200)},
			failures: 4,
		},
		{
			name:     "failures before the first success count from the window's start",
			results:  []result{fail(10, "x"), fail(60, "x"), ok(110, "a")},
			end:      200,
			want:     Outage{Duration: Duration(110 * time.Millisecond), From: t0, To: at(110)},
			failures: 2,
		},
		{
			name:     "nothing but failures",
			results:  []result{fail(0, "x"), fail(50, "x")},
			end:      500,
			want:     Outage{Duration: Duration(500 * time.Millisecond), From: t0, To: at(500), Open: true},
			failures: 2,
		},
		{
			name:    "a gap without failures is not an outage",
			results: []result{ok(0, "a"), ok(5000, "a")},
			end:     5050,
		},
		{
			name: "no probes",
			end:  5000,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := foldAll(tc.results...).summary(at(tc.end))
			if s.LongestOutage != tc.want {
				t.Errorf("longest outage = %+v, want %+v", s.LongestOutage, tc.want)
			}
			if s.Failures != tc.failures || s.Attempts != len(tc.results) || s.Successes != len(tc.results)-tc.failures {
				t.Errorf("attempts/successes/failures = %d/%d/%d, want %d/%d/%d", s.Attempts, s.Successes, s.Failures, len(tc.results), len(tc.results)-tc.failures, tc.failures)
			}
			if wantOpen := tc.want.Open || (len(tc.results) > 0 && tc.results[len(tc.results)-1].err != nil); s.OutageOpen != wantOpen {
				t.Errorf("outage open = %v, want %v", s.OutageOpen, wantOpen)
			}
		})
	}
}

func TestWindowSamplesAndBackends(t *testing.T) {
	var rs []result
	for i := range 8 {
		rs = append(rs, fail(i*10, "err"+string(rune('0'+i))))
	}
	rs = append(rs, ok(100, "pod-a"), ok(110, "pod-b"), ok(120, "pod-a"))
	s := foldAll(rs...).summary(at(200))
	if len(s.FirstErrors) != MaxErrorSamples || s.FirstErrors[0].Error != "err0" || !s.FirstErrors[0].Time.Equal(t0) || s.FirstErrors[MaxErrorSamples-1].Error != "err4" {
		t.Errorf("first errors = %+v, want err0..err4", s.FirstErrors)
	}
	if s.LastError == nil || s.LastError.Error != "err7" || !s.LastError.Time.Equal(at(70)) {
		t.Errorf("last error = %+v, want err7 at +70ms", s.LastError)
	}
	if s.Backends["pod-a"] != 2 || s.Backends["pod-b"] != 1 || len(s.Backends) != 2 {
		t.Errorf("backends = %v, want pod-a:2 pod-b:1", s.Backends)
	}
	if !s.LastSuccess.Equal(at(120)) {
		t.Errorf("last success = %v, want +120ms", s.LastSuccess)
	}

	w := newWindow(t0)
	for i := range maxBackends + 3 {
		w.fold(ok(i, strings.Repeat("x", i+1)))
	}
	if s := w.summary(at(1000)); len(s.Backends) != maxBackends+1 || s.Backends[otherBackends] != 3 {
		t.Errorf("backends beyond %d: %d distinct, %d under %q; want %d and 3", maxBackends, len(s.Backends), s.Backends[otherBackends], otherBackends, maxBackends+1)
	}
}

func TestTrackerFoldsInLaunchOrder(t *testing.T) {
	target, _ := ParseTarget("udp://10.96.0.5:80")
	tr := newTracker(target, t0)
	s0, s1, s2 := tr.launch(), tr.launch(), tr.launch()
	// Probe 1 times out a second after it started; probe 2, launched after it,
	// succeeds first.
	tr.complete(s0, ok(0, "a"))
	tr.complete(s2, ok(100, "a"))
	if s := tr.summary(at(150)); s.Attempts != 1 || s.Pending != 2 || s.LongestOutage.Duration != 0 {
		t.Fatalf("while probe 1 is in flight: attempts %d, pending %d, outage %v; want 1, 2, none", s.Attempts, s.Pending, s.LongestOutage)
	}
	ts := tr.complete(s1, fail(50, "i/o timeout"))
	s := tr.summary(at(1100))
	want := Outage{Duration: Duration(100 * time.Millisecond), From: at(0), To: at(100)}
	if s.Attempts != 3 || s.Failures != 1 || s.Pending != 0 || s.LongestOutage != want {
		t.Errorf("after all completed: attempts %d, failures %d, pending %d, outage %+v; want 3, 1, 0, %+v", s.Attempts, s.Failures, s.Pending, s.LongestOutage, want)
	}
	if len(ts) != 2 || ts[0].OK || !ts[0].Time.Equal(at(50)) || !ts[1].OK || ts[1].Outage != 100*time.Millisecond || ts[1].Target != target {
		t.Errorf("transitions = %+v, want failing at +50ms then recovered after 100ms", ts)
	}
	if ts := tr.complete(s1, ok(50, "a")); ts != nil || tr.summary(at(1100)).Attempts != 3 {
		t.Error("a duplicate completion was counted")
	}
}

func TestTrackerResetCarriesPendingAndOutage(t *testing.T) {
	target, _ := ParseTarget("tcp://10.96.0.5:80")
	tr := newTracker(target, t0)
	s0, s1, s2 := tr.launch(), tr.launch(), tr.launch()
	tr.complete(s0, ok(0, "a"))
	tr.complete(s1, fail(50, "refused"))
	// Window 0 ends at +80ms with probe 2 in flight and an outage in progress.
	old := tr.summary(at(80))
	tr.reset(at(80))
	wantOld := Outage{Duration: Duration(80 * time.Millisecond), From: at(0), To: at(80), Open: true}
	if old.Attempts != 2 || old.Pending != 1 || old.LongestOutage != wantOld {
		t.Errorf("window 0: attempts %d, pending %d, outage %+v; want 2, 1, %+v", old.Attempts, old.Pending, old.LongestOutage, wantOld)
	}
	tr.complete(s2, fail(100, "refused"))
	s3 := tr.launch()
	tr.complete(s3, ok(150, "b"))
	s := tr.summary(at(200))
	want := Outage{Duration: Duration(150 * time.Millisecond), From: at(0), To: at(150)}
	if s.Attempts != 2 || s.Failures != 1 || s.Pending != 0 || s.LongestOutage != want || s.OutageOpen {
		t.Errorf("window 1: attempts %d, failures %d, pending %d, outage %+v (open %v); want 2, 1, 0, %+v", s.Attempts, s.Failures, s.Pending, s.LongestOutage, s.OutageOpen, want)
	}
}

func TestTrackerResetMeasuresFromTheLastSuccessBefore(t *testing.T) {
	target, _ := ParseTarget("tcp://10.96.0.5:80")
	tr := newTracker(target, t0)
	tr.complete(tr.launch(), ok(0, "a"))
	tr.reset(at(30))
	tr.complete(tr.launch(), fail(50, "refused"))
	tr.complete(tr.launch(), ok(100, "a"))
	want := Outage{Duration: Duration(100 * time.Millisecond), From: at(0), To: at(100)}
	if s := tr.summary(at(120)); s.LongestOutage != want || s.Attempts != 2 {
		t.Errorf("window 1: outage %+v over %d probes, want %+v over 2", s.LongestOutage, s.Attempts, want)
	}
}
