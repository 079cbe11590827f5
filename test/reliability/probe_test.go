package reliability

import (
	"testing"
	"time"

	"github.com/kproxy/kproxy/test/lab"
)

func TestSummarise(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ok, ko := lab.Answered, lab.TimedOut
	samples := []Sample{
		sample(at(0), ok, 0), sample(at(100), ok, 0), sample(at(200), ko, ProbeTimeout), sample(at(300), ko, ProbeTimeout), sample(at(400), ok, 0),
		sample(at(500), ok, 0), sample(at(600), ko, ProbeTimeout), sample(at(700), ok, 0), sample(at(800), ok, 0),
	}
	// Unordered input is sorted first.
	samples[3], samples[7] = samples[7], samples[3]
	st := Summarise("s", samples, []time.Time{at(150), at(550)})
	if st.Sent != 9 || st.Failed != 3 || st.Outcomes[ko] != 3 {
		t.Errorf("sent %d failed %d outcomes %v, want 9, 3, 3 timeouts", st.Sent, st.Failed, st.Outcomes)
	}
	if st.LongestOutage != 200*time.Millisecond {
		t.Errorf("longest outage %s, want 200ms (first failure at 200ms, answer at 400ms)", st.LongestOutage)
	}
	// After the event at 150ms the last failure is at 300ms, answered at 400ms: 250ms.
	// After 550ms: failure at 600, answer at 700: 150ms.
	if st.Recovery != 250*time.Millisecond {
		t.Errorf("recovery %s, want 250ms", st.Recovery)
	}
	if st.MaxGap != 100*time.Millisecond {
		t.Errorf("max gap %s, want 100ms", st.MaxGap)
	}
	if st.Rate != 10 {
		t.Errorf("rate %v, want 10/s", st.Rate)
	}
}

func TestSummariseEndsFailing(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	samples := []Sample{sample(t0, lab.Answered, 0), sample(t0.Add(100*time.Millisecond), lab.Refused, 0)}
	st := Summarise("s", samples, []time.Time{t0})
	if want := ProbeTimeout; st.LongestOutage != want {
		t.Errorf("longest outage %s, want %s (the last probe's timeout)", st.LongestOutage, want)
	}
	if want := 100*time.Millisecond + ProbeTimeout; st.Recovery != want {
		t.Errorf("recovery %s, want %s", st.Recovery, want)
	}
	if st := Summarise("none", nil, nil); st.Sent != 0 || st.LongestOutage != 0 {
		t.Errorf("empty stream: %+v", st)
	}
}

func TestSummariseStalled(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	samples := []Sample{
		sample(at(0), lab.Answered, time.Millisecond),
		sample(at(50), lab.TimedOut, 3*time.Second), // frozen prober
		sample(at(100), lab.TimedOut, ProbeTimeout), // a real failure
		sample(at(150), lab.Answered, time.Millisecond),
		{Sent: at(200), Outcome: lab.TimedOut, Elapsed: ProbeTimeout, Frozen: true}, // timed out in a freeze
	}
	st := Summarise("s", samples, []time.Time{at(10)})
	if st.Failed != 1 || st.Stalled != 2 {
		t.Errorf("failed %d stalled %d, want 1 and 2", st.Failed, st.Stalled)
	}
	if st.LongestOutage != 50*time.Millisecond || st.Recovery != 140*time.Millisecond {
		t.Errorf("outage %s recovery %s, want 50ms and 140ms", st.LongestOutage, st.Recovery)
	}
}

// sample is a probe sent at sent with its outcome.
func sample(sent time.Time, o lab.Outcome, elapsed time.Duration) Sample {
	return Sample{Sent: sent, Outcome: o, Elapsed: elapsed}
}

// TestFrozenAt: a timed-out probe is frozen only when a freeze began before its
// timeout fell due and it was reported by the freeze's end.
func TestFrozenAt(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	freezes := []freeze{{from: at(500), to: at(1600)}, {from: at(5000), to: at(5300)}}
	for _, c := range []struct {
		name        string
		start, done int // ms
		want        bool
	}{
		{"due at 1000 inside the first freeze, reported at its end", 0, 1600, true},
		{"reported just after the freeze ended (the goroutines run in turn)", 0, 1640, true},
		{"reported well after the freeze ended", 0, 1700, false},
		{"due at 2000, after the freeze ended", 1000, 2000, false},
		{"the freeze began after the probe fell due", 3900, 5100, false},
		{"due at 5000, the freeze's first moment", 4000, 5300, true},
		{"no freeze near", 7000, 8000, false},
	} {
		if got := frozenAt(freezes, at(c.start), at(c.done)); got != c.want {
			t.Errorf("%s: frozen %v, want %v", c.name, got, c.want)
		}
	}
}

// TestLateWake: a heartbeat that woke more than freezeThreshold after its tick saw a
// freeze spanning from its last run to now; one on time or a little late did not.
func TestLateWake(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		after time.Duration
		want  bool
	}{
		{heartbeatTick, false},
		{heartbeatTick + freezeThreshold, false},
		{heartbeatTick + freezeThreshold + time.Millisecond, true},
		{1150 * time.Millisecond, true},
	} {
		f, ok := lateWake(t0, t0.Add(c.after))
		if ok != c.want || (ok && (!f.from.Equal(t0) || !f.to.Equal(t0.Add(c.after)))) {
			t.Errorf("woke %s after the last run: freeze %v (%v); want %v from the last run to now", c.after, ok, f, c.want)
		}
	}
}
