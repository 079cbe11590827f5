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
		{at(0), ok, 0}, {at(100), ok, 0}, {at(200), ko, ProbeTimeout}, {at(300), ko, ProbeTimeout}, {at(400), ok, 0},
		{at(500), ok, 0}, {at(600), ko, ProbeTimeout}, {at(700), ok, 0}, {at(800), ok, 0},
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
	samples := []Sample{{t0, lab.Answered, 0}, {t0.Add(100 * time.Millisecond), lab.Refused, 0}}
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
		{at(0), lab.Answered, time.Millisecond},
		{at(50), lab.TimedOut, 3 * time.Second}, // frozen prober
		{at(100), lab.TimedOut, ProbeTimeout},   // a real failure
		{at(150), lab.Answered, time.Millisecond},
	}
	st := Summarise("s", samples, []time.Time{at(10)})
	if st.Failed != 1 || st.Stalled != 1 {
		t.Errorf("failed %d stalled %d, want 1 and 1", st.Failed, st.Stalled)
	}
	if st.LongestOutage != 50*time.Millisecond || st.Recovery != 140*time.Millisecond {
		t.Errorf("outage %s recovery %s, want 50ms and 140ms", st.LongestOutage, st.Recovery)
	}
}
