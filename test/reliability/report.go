package reliability

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kproxy/kproxy/bench"
)

// Result is one run of a scenario: one proxy in one mode.
type Result struct {
	Scenario  string
	Proxy     string
	Mode      string
	Streams   []StreamStats
	RSSBefore float64 // MiB, once the first proxy instance has synced
	RSSAfter  float64 // MiB, at the end (the last instance)
	Lost      string  // empty: nothing lost
	// Freezes is how often the prober's process was frozen (Runner.Freezes), and
	// LongestFreeze the longest.
	Freezes       int
	LongestFreeze time.Duration
	Notes         string
	Err           string `json:",omitempty"` // the run could not complete
	Soak          *Soak  `json:",omitempty"` // scenario 4's windows and verdicts
}

// Sent, Failed, LongestOutage and Recovery sum up the streams.
func (r Result) Sent() (n int) {
	for _, s := range r.Streams {
		n += s.Sent
	}
	return n
}

func (r Result) Failed() (n int) {
	for _, s := range r.Streams {
		n += s.Failed
	}
	return n
}

func (r Result) Stalled() (n int) {
	for _, s := range r.Streams {
		n += s.Stalled
	}
	return n
}

// LongestOutage is the longest outage of any stream, and that stream's name.
func (r Result) LongestOutage() (time.Duration, string) {
	var d time.Duration
	var name string
	for _, s := range r.Streams {
		if s.LongestOutage > d {
			d, name = s.LongestOutage, s.Name
		}
	}
	return d, name
}

func (r Result) Recovery() (d time.Duration) {
	for _, s := range r.Streams {
		d = max(d, s.Recovery)
	}
	return d
}

// MinRate is the lowest probe rate of any stream.
func (r Result) MinRate() float64 {
	if len(r.Streams) == 0 {
		return 0
	}
	rate := r.Streams[0].Rate
	for _, s := range r.Streams[1:] {
		rate = min(rate, s.Rate)
	}
	return rate
}

// MaxGap is the longest pause in sending of any stream.
func (r Result) MaxGap() (d time.Duration) {
	for _, s := range r.Streams {
		d = max(d, s.MaxGap)
	}
	return d
}

// Report collects the results of a test run.
type Report struct {
	Started   time.Time
	Version   string // "short", "full", or a reduced full version
	LoadStart string // /proc/loadavg at the start
	Machine   string `json:",omitempty"`
	Command   string `json:",omitempty"`

	mu      sync.Mutex
	Results []Result
}

// Add records a result.
func (rp *Report) Add(r Result) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.Results = append(rp.Results, r)
}

// LoadAvg is the first three fields of /proc/loadavg.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// Markdown renders the table with its header.
func (rp *Report) Markdown() string {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "# Reliability, %s version, %s\n\n", rp.Version, rp.Started.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "Command: `%s`. Machine: %s; load average at the start %s.\n\n", rp.Command, rp.Machine, rp.LoadStart)
	fmt.Fprintf(&b, "Six probe streams per run (ClusterIP from a pod on node1 and from node1, NodePort from the external client; TCP and UDP), "+
		"one probe every %s per stream; a probe fails when nothing answered within %s. An outage is the span from a stream's first failed probe to its next answer; "+
		"the time to recover is the longest from a disruption (a signal, a batch of odd objects) to the first answer after the failures it caused. "+
		"Stalled: probes that timed out while the prober itself was frozen (the machine is shared): reported more than %s after their timeout, or due within a freeze of the prober's process (a heartbeat woken every %s ran more than %s late) and reported at its end; not counted as failed. "+
		"Lost: whether, after the scenario, a probe target or one of 20 sampled Services stopped answering or the kernel held fewer Service rules than before.\n\n",
		ProbeInterval, ProbeTimeout, stallSlack, heartbeatTick, freezeThreshold)
	b.WriteString("| scenario | proxy | mode | probes | failed | stalled | longest outage | time to recover | RSS before | RSS after | lost | notes |\n")
	b.WriteString("| --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | --- |\n")
	for _, r := range rp.Results {
		out, stream := r.LongestOutage()
		outage := "0"
		if out > 0 {
			outage = fmt.Sprintf("%s (%s)", fmtDur(out), stream)
		}
		lost := "nothing"
		if r.Lost != "" {
			lost = "**" + oneLine(r.Lost) + "**"
		}
		notes := r.Notes
		if r.Err != "" {
			notes = "**did not complete: " + oneLine(r.Err) + "** " + notes
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d | %s | %s | %s | %s | %s | %s |\n",
			r.Scenario, r.Proxy, r.Mode, r.Sent(), r.Failed(), r.Stalled(), outage, fmtDur(r.Recovery()),
			bench.FmtMiB(r.RSSBefore), bench.FmtMiB(r.RSSAfter), lost, notes)
	}
	rp.soakMarkdown(&b)
	return b.String()
}

// soakMarkdown renders scenario 4's windows and verdicts, when it ran.
func (rp *Report) soakMarkdown(b *strings.Builder) {
	var soaks []Result
	for _, r := range rp.Results {
		if r.Soak != nil {
			soaks = append(soaks, r)
		}
	}
	if len(soaks) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Scenario 4, churn soak\n\n"+
		"Changes are made at a steady rate (changes/s: made, of asked), one per tick of a ticker: a measured one (a churn Service's only endpoint replaced by another pod; its latency runs from the update returning "+
		"to the first probe through the ClusterIP answered by the new pod, probed every %s, capped at %s) whenever the previous measured change was seen, "+
		"otherwise one to a Service without real backends (every %dth moves its port between 80 and 81, the others flip an endpoint's readiness). "+
		"RSS (VmRSS) is read every %s, goroutines (go_goroutines on the metrics port) every %s. "+
		"Verdicts: RSS after the soak within %.0f%% of RSS after the first minute, each the peak of a minute's readings (the first minute's, the last minute's: "+
		"RSS is a sawtooth with the GC cycle, whose peak is where the GC's goal puts the heap and follows the live heap, while a single reading lands anywhere on it); "+
		"goroutines flat: at most %d more at the end than after the first minute; "+
		"p99 stable: no window's p99 over %d× the lowest window's plus %s (a window with fewer than %d measured changes has its slowest change as p99: marked \"few\", and kproxy is not held to it).\n\n",
		soakPoll, fmtDur(bench.DefaultChangeBound), portEvery, rssSample, soakSample, 100*rssGrowthBound, goroutineSlack, p99Factor, fmtDur(p99Floor), p99Samples)
	b.WriteString("| proxy | mode | Services | changes/s | peak RSS first minute → last minute (min–max) | goroutines after 1 min → after (min–max) | p99 per window | RSS | goroutines | p99 |\n")
	b.WriteString("| --- | --- | ---: | ---: | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range soaks {
		s := r.Soak
		rssOK, gOK, p99OK := s.Verdicts()
		fmt.Fprintf(b, "| %s | %s | %d | %.1f of %d | %s → %s (%+.1f%%; %.0f–%.0f) | %d → %d (%+d; %d–%d) | %s | %s | %s | %s |\n",
			r.Proxy, r.Mode, s.Services, s.Rate, s.Target, bench.FmtMiB(s.RSSFirstMinute), bench.FmtMiB(s.RSSEnd), 100*s.RSSGrowth(), s.RSSMin, s.RSSMax,
			s.GoroutinesFirstMinute, s.GoroutinesEnd, s.GoroutineGrowth(), s.GoroutinesMin, s.GoroutinesMax, p99Line(s),
			mark(rssOK, "within 10%", "grew over 10%"), mark(gOK, "flat", "grew"), p99Verdict(s, p99OK))
	}
	b.WriteString("\nPer window (latencies of the measured changes written in the window; RSS its peak, goroutines read at its end):\n\n")
	b.WriteString("| proxy | mode | window | changes | measured | p50 | p99 | max | capped | peak RSS | goroutines |\n")
	b.WriteString("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range soaks {
		s := r.Soak
		for _, w := range s.Windows {
			fmt.Fprintf(b, "| %s | %s | %s–%s | %d | %d | %s | %s | %s | %d | %s | %d |\n",
				r.Proxy, r.Mode, fmtMinutes(w.End-s.Window), fmtMinutes(w.End), w.Changes, w.Measured,
				fmtDur(w.P50), fmtDur(w.P99), fmtDur(w.Max), w.Capped, bench.FmtMiB(w.RSS), w.Goroutines)
		}
	}
}

// mark is good when ok, else bad in bold.
func mark(ok bool, good, bad string) string {
	if ok {
		return good
	}
	return "**" + bad + "**"
}

// p99Verdict is the p99 column of a soak: stable or not, and "few" when a window's p99
// is its slowest change (Soak.P99Percentile).
func p99Verdict(s *Soak, ok bool) string {
	v := mark(ok, "stable", "not stable")
	if !s.P99Percentile() {
		v += fmt.Sprintf(" (few: under %d a window)", p99Samples)
	}
	return v
}

// fmtMinutes prints a soak's offset: "0", "30s", "5m", "2m30s".
func fmtMinutes(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	if d%time.Minute == 0 {
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

func fmtDur(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return d.Round(time.Millisecond).String()
}

// oneLine keeps a table cell on one line and short.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// Write writes the table to dir/<timestamp>-reliability.md and the raw results beside
// it (.json), and returns the .md path.
func (rp *Report) Write(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("results dir: %w", err)
	}
	path := filepath.Join(dir, rp.Started.UTC().Format(bench.ResultsStamp)+"-reliability.md")
	if err := os.WriteFile(path, []byte(rp.Markdown()), 0o644); err != nil {
		return "", fmt.Errorf("write results: %w", err)
	}
	rp.mu.Lock()
	b, err := json.MarshalIndent(rp, "", "  ")
	rp.mu.Unlock()
	if err != nil {
		return "", fmt.Errorf("encode results: %w", err)
	}
	if err := os.WriteFile(strings.TrimSuffix(path, ".md")+".json", b, 0o644); err != nil {
		return "", fmt.Errorf("write results: %w", err)
	}
	return path, nil
}
