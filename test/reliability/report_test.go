package reliability

import (
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/bench"
)

// TestSummariseSoak cuts a soak of 2 minutes into windows of 30 s: changes and
// latencies fall in the window they were written in, goroutines are the readings at
// each window's end, RSS the peak of the window's readings, and RSS is compared as
// the peaks of the first and the last minute's readings.
func TestSummariseSoak(t *testing.T) {
	cfg := SoakConfig{Services: 100, Duration: 2 * time.Minute, Window: 30 * time.Second, Rate: 50}
	start := time.Unix(1000, 0)
	var readings []soakReading
	for k := 1; k <= 12; k++ { // one every soakSample
		readings = append(readings, soakReading{goroutines: 70 + k%2, changes: int64(500 * k)})
	}
	// RSS read every second: a sawtooth of 20 s from 50 to 69.5 MiB whose base
	// rises by 1 MiB a minute, and one low reading at the very end.
	var rss []float64
	for k := 1; k <= 120; k++ {
		rss = append(rss, 50+float64(k%20)+float64(k/60))
	}
	rss[119] = 40
	var measured []bench.Change
	for i := range 240 { // one every half second, latency growing with the window
		written := start.Add(time.Duration(i) * 500 * time.Millisecond)
		lat := time.Second + time.Duration(i/60)*100*time.Millisecond
		measured = append(measured, bench.Change{Written: written, Answered: written.Add(lat)})
	}
	s := summariseSoak(cfg, measured, readings, rss, start)
	if len(s.Windows) != 4 {
		t.Fatalf("%d windows, want 4: %+v", len(s.Windows), s.Windows)
	}
	for i, w := range s.Windows {
		want := time.Second + time.Duration(i)*100*time.Millisecond
		if w.End != time.Duration(i+1)*30*time.Second || w.Changes != 1500 || w.Measured != 60 || w.P99 != want || w.P50 != want {
			t.Errorf("window %d: %+v; want end %s, 1500 changes, 60 measured, p50 = p99 = %s", i, w, time.Duration(i+1)*30*time.Second, want)
		}
		if rd := readings[3*i+2]; w.Goroutines != rd.goroutines {
			t.Errorf("window %d: goroutines %d; want the reading at its end %+v", i, w.Goroutines, rd)
		}
		if wantRSS := []float64{69, 69, 70, 70}[i]; w.RSS != wantRSS {
			t.Errorf("window %d: RSS %v, want its peak %v", i, w.RSS, wantRSS)
		}
	}
	if s.RSSFirstMinute != 69 || s.RSSEnd != 70 || s.RSSMin != 40 || s.RSSMax != 70 || len(s.RSSReadings) != 120 ||
		s.GoroutinesFirstMinute != 70 || s.GoroutinesEnd != 70 || s.GoroutinesMin != 70 || s.GoroutinesMax != 71 {
		t.Errorf("reference and end: %+v", s)
	}
	if rssOK, gOK, p99OK := s.Verdicts(); !rssOK || !gOK || !p99OK {
		t.Errorf("RSS within 10%% %v (peaks 69 → 70 MiB), goroutines flat %v (70 → 70), p99 stable %v (1.0 to 1.3 s); want all", rssOK, gOK, p99OK)
	}
	s.RSSEnd, s.GoroutinesEnd = 76, 81
	if rssOK, gOK, _ := s.Verdicts(); rssOK || gOK {
		t.Errorf("RSS 69 → 76 MiB within 10%%: %v; goroutines 70 → 81 flat: %v; want neither", rssOK, gOK)
	}
	if s.P99Percentile() {
		t.Errorf("60 changes a window counted as enough for a p99")
	}
	s.Windows[3].P99 = 3 * time.Second
	if _, _, p99OK := s.Verdicts(); p99OK {
		t.Errorf("p99 from 1 s to 3 s counted as stable")
	}
}

// TestHeaderNamesNoScenario: the table's header names the version, not one scenario's
// sizes (scenario 2's table was headed by scenario 1's restarts).
func TestHeaderNamesNoScenario(t *testing.T) {
	t.Setenv(VersionEnv, "full")
	t.Setenv(RestartsEnv, "")
	t.Setenv(SoakServicesEnv, "")
	t.Setenv(SoakDurationEnv, "")
	t.Setenv(SoakWindowEnv, "")
	if v := version(); v != "full" {
		t.Errorf("version() = %q, want full", v)
	}
	t.Setenv(RestartsEnv, "5")
	t.Setenv(SoakDurationEnv, "6m")
	if v := version(); !strings.Contains(v, "5 restarts per signal instead of 20") || !strings.Contains(v, "for 6m0s") {
		t.Errorf("version() = %q, want the changed restarts and soak named", v)
	}
	rp := &Report{Version: "full", Results: []Result{{Scenario: "2. API server: 3 restarts, then down 1m0s; 1000 Services", Proxy: "kproxy", Mode: "nftables"}}}
	if h, _, _ := strings.Cut(rp.Markdown(), "\n"); strings.Contains(h, "restarts") {
		t.Errorf("header %q names a scenario's sizes", h)
	}
}
