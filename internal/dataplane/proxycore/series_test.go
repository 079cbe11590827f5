package proxycore

import (
	"errors"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kproxy/kproxy/internal/dataplane/followup"
	"github.com/kproxy/kproxy/internal/model"
)

var seriesEpoch = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

// TestSeriesBuckets: syncs within one SeriesStep add up in one bucket; Points lists
// the buckets with syncs of the last SeriesSpan, oldest first.
func TestSeriesBuckets(t *testing.T) {
	var s Series
	s.Add(seriesEpoch.Add(1*time.Second), 10*time.Millisecond, false, followup.Programming{Count: 2, Sum: 300 * time.Millisecond, Max: 200 * time.Millisecond})
	s.Add(seriesEpoch.Add(9*time.Second), 30*time.Millisecond, true, followup.Programming{})
	s.Add(seriesEpoch.Add(25*time.Second), 5*time.Millisecond, false, followup.Programming{Count: 1, Sum: 50 * time.Millisecond, Max: 50 * time.Millisecond})

	got := s.Points(seriesEpoch.Add(30 * time.Second))
	if len(got) != 2 {
		t.Fatalf("%d points, want 2: %+v", len(got), got)
	}
	first := got[0]
	want := SeriesPoint{Start: seriesEpoch, Syncs: 2, Failures: 1, DurationSum: 40 * time.Millisecond, DurationMax: 30 * time.Millisecond,
		Programming: followup.Programming{Count: 2, Sum: 300 * time.Millisecond, Max: 200 * time.Millisecond}}
	if first != want {
		t.Errorf("first bucket %+v, want %+v", first, want)
	}
	if first.DurationMean() != 20*time.Millisecond || first.ProgrammingMean() != 150*time.Millisecond {
		t.Errorf("means %s and %s, want 20ms and 150ms", first.DurationMean(), first.ProgrammingMean())
	}
	if got[1].Start != seriesEpoch.Add(20*time.Second) || got[1].Syncs != 1 {
		t.Errorf("second bucket %+v, want one sync at +20s", got[1])
	}
	if (&SeriesPoint{}).DurationMean() != 0 || (&SeriesPoint{}).ProgrammingMean() != 0 {
		t.Error("an empty bucket has a mean")
	}
}

// TestSeriesRollsOff: a bucket leaves Points once it is older than SeriesSpan, and
// its slot is reused, not added to, by a sync a whole span later.
func TestSeriesRollsOff(t *testing.T) {
	var s Series
	s.Add(seriesEpoch, time.Millisecond, false, followup.Programming{})
	if n := len(s.Points(seriesEpoch.Add(SeriesSpan - time.Nanosecond))); n != 1 {
		t.Errorf("%d points just before the span ends, want 1", n)
	}
	if n := len(s.Points(seriesEpoch.Add(SeriesSpan))); n != 0 {
		t.Errorf("%d points a span later, want 0", n)
	}
	later := seriesEpoch.Add(SeriesSpan)
	s.Add(later, 7*time.Millisecond, false, followup.Programming{})
	got := s.Points(later)
	if len(got) != 1 || got[0].Start != later || got[0].Syncs != 1 || got[0].DurationMax != 7*time.Millisecond {
		t.Errorf("after the slot's reuse: %+v, want one sync of 7ms at %s", got, later)
	}
}

// TestSeriesFixedSize: a day of syncs every second keeps at most SeriesLen buckets.
func TestSeriesFixedSize(t *testing.T) {
	var s Series
	at := seriesEpoch
	for range 24 * 3600 {
		s.Add(at, time.Millisecond, false, followup.Programming{})
		at = at.Add(time.Second)
	}
	got := s.Points(at)
	if len(got) != SeriesLen-1 {
		// The bucket of at itself has no sync yet.
		t.Fatalf("%d points, want %d", len(got), SeriesLen-1)
	}
	for i, p := range got {
		if p.Syncs != int(SeriesStep/time.Second) {
			t.Fatalf("bucket %d (%s): %d syncs, want %d", i, p.Start, p.Syncs, SeriesStep/time.Second)
		}
		if i > 0 && !p.Start.After(got[i-1].Start) {
			t.Fatalf("bucket %d not after the one before: %s, %s", i, got[i-1].Start, p.Start)
		}
	}
}

// TestSeriesBeforeEpoch: a fake clock at or before the Unix epoch still counts.
func TestSeriesBeforeEpoch(t *testing.T) {
	var s Series
	for _, at := range []time.Time{time.Unix(0, 0), time.Unix(-15, 0)} {
		s.Add(at, time.Millisecond, false, followup.Programming{})
	}
	if got := s.Points(time.Unix(0, 0)); len(got) != 2 || got[0].Start != time.Unix(-20, 0).UTC() {
		t.Errorf("points %+v, want two, the first at -20s", got)
	}
}

// TestFailuresOutliveHistory: a failure stays listed after HistoryLen later syncs,
// and at most FailuresLen are kept, newest first.
func TestFailuresOutliveHistory(t *testing.T) {
	clk := clocktesting.NewFakeClock(seriesEpoch)
	c, err := New("test", &Config{Family: v1.IPv4Protocol, State: model.NewState(v1.IPv4Protocol, "node-a"), Clock: clk}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	sync := func(err error) {
		start := clk.Now()
		clk.Step(2 * time.Millisecond)
		c.Record(start, &model.Update{}, false, true, 1, err)
		clk.Step(time.Second)
	}
	sync(errors.New("first failure"))
	for range HistoryLen {
		sync(nil)
	}
	for _, r := range c.Syncs() {
		if r.Err != nil {
			t.Fatalf("the History still holds the failure after %d syncs", HistoryLen)
		}
	}
	if f := c.Failures(); len(f) != 1 || f[0].Err.Error() != "first failure" || f[0].Start != seriesEpoch || f[0].Duration != 2*time.Millisecond {
		t.Fatalf("Failures() = %+v, want the first failure", f)
	}
	for i := range FailuresLen + 3 {
		sync(fmt.Errorf("failure %d", i))
	}
	f := c.Failures()
	if len(f) != FailuresLen || f[0].Err.Error() != fmt.Sprintf("failure %d", FailuresLen+2) || f[FailuresLen-1].Err.Error() != "failure 3" {
		t.Errorf("%d failures kept, newest %v, oldest %v; want %d, from failure %d down to failure 3", len(f), f[0].Err, f[len(f)-1].Err, FailuresLen, FailuresLen+2)
	}

	// Every sync is in the series, as of the Core's clock.
	total, failures := 0, 0
	for _, p := range c.Series() {
		total += p.Syncs
		failures += p.Failures
	}
	if want := 1 + HistoryLen + FailuresLen + 3; total != want || failures != FailuresLen+4 {
		t.Errorf("series: %d syncs, %d failures; want %d and %d", total, failures, want, FailuresLen+4)
	}
}
