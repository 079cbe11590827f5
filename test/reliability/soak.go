package reliability

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kproxy/kproxy/bench"
)

// SoakConfig sizes scenario 4.
type SoakConfig struct {
	Services int           // bulk Services loaded (besides the probe Service)
	Duration time.Duration // how long the changes run
	Window   time.Duration // latency, RSS and goroutines are reported per window
	Rate     int           // changes per second, the measured ones included
}

// Soak pacing and sampling.
const (
	// soakSample is how often the proxy's goroutines are read; windows and the
	// first minute are multiples of it.
	soakSample = 10 * time.Second
	// rssSample is how often the proxy's RSS is read (from /proc, cheap). A Go
	// process's RSS is a sawtooth: the heap grows to the GC's goal, is collected,
	// and the scavenger returns pages slowly. kproxy's at 10,000 Services in
	// nftables mode rose and fell by 40 MiB (150 to 195 MiB) in a cycle of about
	// 40 s (a collection every 10 to 12 s, the drift check's lower GC target every
	// 30 to 40 s), so readings every 10 s alias with the cycle: their medians over a
	// minute moved by 20% between minutes while the live heap after each
	// collection stayed within 72 to 82 MB (GODEBUG=gctrace=1, 2026-12-07). Read
	// every second, every minute holds at least one peak.
	rssSample = time.Second
	// soakReference is when the reference RSS and goroutines are read: the issue
	// compares the RSS after the soak with the RSS after its first minute.
	soakReference = time.Minute
	// soakWriters make the unmeasured changes, each on its own share of the
	// Services (no two writers ever update one object), each with up to
	// writerBacklog ticks waiting: 50/s is 160 ms per write and writer, room for the
	// lab's API server on a loaded machine (four writers without a backlog made 30/s
	// at load average 17).
	soakWriters   = 8
	writerBacklog = 4
	// soakPoll paces the probes of a measured change while its new endpoint does not
	// answer yet: 10 ms is fine enough beside latencies of about a second (the
	// proxies' minSyncPeriod), and keeps the probing to 100 connections/s for the
	// whole soak (the bench polls every millisecond, one change at a time).
	soakPoll = 10 * time.Millisecond
	// portEvery: every portEvery-th change of a writer moves a Service's port (a
	// Service change); the others flip an endpoint's readiness (an EndpointSlice
	// change).
	portEvery = 5
)

// Verdict bounds (see Soak.Verdicts).
const (
	// rssGrowthBound is the issue's: the RSS after the soak within 10% of the RSS
	// after the first minute.
	rssGrowthBound = 0.10
	// goroutineSlack is how many goroutines more at the end than after the first
	// minute still count as flat: client-go's watches and the HTTP clients start
	// and end a few as connections come and go; a leak per change would add
	// thousands.
	goroutineSlack = 10
	// p99Samples: a window's p99 is a percentile only with at least this many
	// measured changes; with fewer it is the slowest one, which a loaded machine's
	// scheduling decides as much as the proxy.
	p99Samples = 100
	// p99Factor and p99Floor: the p99 is stable when no window's p99 exceeds
	// p99Factor times the lowest window's plus p99Floor. A proxy that slows down
	// as it runs (a growing queue or state) doubles it within a soak; one slow sync
	// on a shared machine moves a window's p99 by a few hundred milliseconds.
	p99Factor = 2
	p99Floor  = 250 * time.Millisecond
)

// SoakWindow is one window of a soak.
type SoakWindow struct {
	End      time.Duration // since the soak started
	Changes  int           // made in the window, the measured ones included
	Measured int           // measured changes written in the window
	Capped   int           // of them, not seen within bench.DefaultChangeBound
	// P50, P99 and Max of the measured changes' latency (bench.Change.Latency).
	P50, P99, Max time.Duration
	RSS           float64 // MiB, the peak of the window's readings
	Goroutines    int     // go_goroutines at the window's end; -1 when unread
}

// Soak is what scenario 4 measures besides the probes.
type Soak struct {
	Services         int
	Duration, Window time.Duration
	Target           int     // changes per second asked for
	Rate             float64 // made per second
	Skipped          int     // ticks skipped because a writer was writerBacklog changes behind
	Windows          []SoakWindow
	// The reference (after the first minute) and the end. RSS is the peak of a
	// minute's readings, one every rssSample (the first minute's; the last
	// minute's): the sawtooth's peak is where the GC's goal puts the heap, twice
	// what was live at the last collection, so it follows the live heap (a leak
	// raises it), while a single reading, or the median of a few, lands anywhere
	// on the sawtooth (see rssSample). Goroutines are single readings.
	RSSFirstMinute, RSSEnd               float64
	RSSMin, RSSMax                       float64 // of every reading
	GoroutinesFirstMinute, GoroutinesEnd int
	GoroutinesMin, GoroutinesMax         int
	// RSSReadings are every RSS reading (MiB), one per rssSample;
	// GoroutineReadings one per soakSample.
	RSSReadings       []float64
	GoroutineReadings []int
}

// RSSGrowth is the RSS after the soak relative to the RSS after the first minute
// (0.05 is 5% more).
func (s *Soak) RSSGrowth() float64 {
	if s.RSSFirstMinute == 0 {
		return 0
	}
	return s.RSSEnd/s.RSSFirstMinute - 1
}

// GoroutineGrowth is the goroutines after the soak less those after the first minute.
func (s *Soak) GoroutineGrowth() int { return s.GoroutinesEnd - s.GoroutinesFirstMinute }

// P99Range is the lowest and highest p99 of the windows with measured changes.
func (s *Soak) P99Range() (lo, hi time.Duration) {
	first := true
	for _, w := range s.Windows {
		if w.Measured == 0 {
			continue
		}
		if first {
			lo, hi, first = w.P99, w.P99, false
		}
		lo, hi = min(lo, w.P99), max(hi, w.P99)
	}
	return lo, hi
}

// P99Percentile reports whether every window measured at least p99Samples changes, so
// that its p99 is a percentile rather than its slowest change.
func (s *Soak) P99Percentile() bool {
	for _, w := range s.Windows {
		if w.Measured < p99Samples {
			return false
		}
	}
	return len(s.Windows) > 0
}

// Verdicts holds a soak to the three bounds: RSS growth within 10%,
// goroutines flat, the p99 stable over the windows.
func (s *Soak) Verdicts() (rssOK, goroutinesOK, p99OK bool) {
	lo, hi := s.P99Range()
	measured := 0
	for _, w := range s.Windows {
		measured += w.Measured
	}
	return s.RSSGrowth() <= rssGrowthBound,
		s.GoroutinesFirstMinute >= 0 && s.GoroutinesEnd >= 0 && s.GoroutineGrowth() <= goroutineSlack,
		measured > 0 && hi <= p99Factor*lo+p99Floor
}

// RunChurnSoak is scenario 4: for cfg.Duration, cfg.Rate changes a second to the bulk
// Services, under probes. One goroutine makes measured changes one after another (a
// churn Service's endpoint replaced, bench.Loader.ChangeEndpoint: from the update
// returning to the new endpoint answering through the ClusterIP); every tick that
// finds it busy goes to soakWriters writers, which change the other Services that
// have no real backends (every fifth change moves a port, the others flip an
// endpoint's readiness). The proxy's RSS is read every rssSample, its goroutines
// every soakSample.
func RunChurnSoak(ctx context.Context, w *World, p bench.Proxy, mode string, cfg SoakConfig) (Result, error) {
	res := Result{
		Scenario: fmt.Sprintf("4. churn soak, %d Services, %d changes/s for %s", cfg.Services, cfg.Rate, cfg.Duration),
		Proxy:    p.Name, Mode: mode,
	}
	err := runScenario(ctx, w, p, mode, cfg.Services, &res, func(r *scenarioRun) (string, error) {
		s, err := soak(ctx, r, cfg)
		res.Soak = s
		if s == nil {
			return "", err
		}
		rssOK, gOK, p99OK := s.Verdicts()
		return fmt.Sprintf("%.1f changes/s (%d ticks skipped by busy writers); RSS in the first minute %s, in the last %s (peaks, %+.1f%%); goroutines %d → %d; p99 per window %s; verdict: %s",
			s.Rate, s.Skipped, bench.FmtMiB(s.RSSFirstMinute), bench.FmtMiB(s.RSSEnd), 100*s.RSSGrowth(), s.GoroutinesFirstMinute, s.GoroutinesEnd,
			p99Line(s), verdictLine(s, rssOK, gOK, p99OK)), err
	})
	return res, err
}

// soakReading is one reading of the proxy's goroutines and the changes made so far,
// every soakSample.
type soakReading struct {
	goroutines int
	changes    int64
}

func soak(ctx context.Context, r *scenarioRun, cfg SoakConfig) (*Soak, error) {
	if cfg.Window%soakSample != 0 || cfg.Duration%cfg.Window != 0 || cfg.Duration < soakReference || cfg.Rate <= 0 {
		return nil, fmt.Errorf("soak of %s in windows of %s at %d/s: the windows must be multiples of %s, the duration a multiple of the window and at least %s",
			cfg.Duration, cfg.Window, cfg.Rate, soakSample, soakReference)
	}
	ld := r.w.Bulk
	var churn, others []*bench.Svc
	for _, s := range ld.Svcs[:cfg.Services] {
		switch {
		case bench.IsChurn(s.Index):
			churn = append(churn, s)
		case !bench.IsReal(s.Index):
			others = append(others, s)
		}
	}
	if len(churn) == 0 || len(others) < soakWriters {
		return nil, fmt.Errorf("%d Services have %d churn Services and %d others: too few for a soak", cfg.Services, len(churn), len(others))
	}

	var changes, skipped atomic.Int64
	// Each appended to by one goroutine only, and read once they have ended.
	var measured []bench.Change
	readings := make([]soakReading, 0, cfg.Duration/soakSample)
	rssReadings := make([]float64, 0, cfg.Duration/rssSample)
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)

	// The pacer hands out the changes as they fall due: to the measurer when it is
	// idle, else to the next writer.
	measure := make(chan struct{})
	writers := make([]chan struct{}, soakWriters)
	for i := range writers {
		writers[i] = make(chan struct{}, writerBacklog)
	}
	g.Go(func() error {
		defer func() {
			close(measure)
			for _, c := range writers {
				close(c)
			}
		}()
		tick := time.NewTicker(time.Second / time.Duration(cfg.Rate))
		defer tick.Stop()
		deadline := start.Add(cfg.Duration)
		for k, ticks := 0, 0; ; {
			var now time.Time
			select {
			case <-gctx.Done():
				return gctx.Err()
			case <-r.px.Process.Done():
				return fmt.Errorf("the proxy exited during the soak (%w); log tail:\n%s", r.px.Process.ExitReason(), r.px.Process.LogTail(30))
			case now = <-tick.C:
				if !now.Before(deadline) {
					return nil
				}
			}
			// A ticker drops the ticks its reader was too late for (this process
			// starved on a loaded machine made 45/s of 50): each tick hands out every
			// change due since the start, so the rate holds on average.
			due := int(min(time.Since(start), cfg.Duration) * time.Duration(cfg.Rate) / time.Second)
			for ; ticks < due; ticks++ {
				select {
				case measure <- struct{}{}:
					continue
				default:
				}
				// A writer still writerBacklog changes behind skips this change: the
				// rate made is reported, not assumed.
				select {
				case writers[k%len(writers)] <- struct{}{}:
				default:
					skipped.Add(1)
				}
				k++
			}
		}
	})
	g.Go(func() error {
		for k := 0; ; k++ {
			if _, ok := <-measure; !ok {
				return nil
			}
			ch, err := ld.ChangeEndpoint(gctx, r.w.Client, churn[k%len(churn)], bench.DefaultChangeBound, soakPoll)
			if err != nil {
				return fmt.Errorf("measured change %d: %w", k, err)
			}
			changes.Add(1)
			measured = append(measured, ch)
		}
	})
	for i, c := range writers {
		var mine []*bench.Svc
		for j := i; j < len(others); j += len(writers) {
			mine = append(mine, others[j])
		}
		g.Go(func() error {
			for k := 0; ; k++ {
				if _, ok := <-c; !ok {
					return nil
				}
				if err := changeOther(gctx, ld, mine[k%len(mine)], k%portEvery == portEvery-1); err != nil {
					return err
				}
				changes.Add(1)
			}
		})
	}
	g.Go(func() error {
		tick := time.NewTicker(soakSample)
		defer tick.Stop()
		for range cap(readings) {
			select {
			case <-gctx.Done():
				return nil // the pacer or a writer says why
			case <-tick.C:
			}
			n, err := r.px.Metric(gctx, "go_goroutines")
			if err != nil {
				n = -1 // reported as unread; the soak goes on
			}
			readings = append(readings, soakReading{goroutines: int(n), changes: changes.Load()})
		}
		return nil
	})
	g.Go(func() error {
		tick := time.NewTicker(rssSample)
		defer tick.Stop()
		for range cap(rssReadings) {
			select {
			case <-gctx.Done():
				return nil
			case <-tick.C:
			}
			rssReadings = append(rssReadings, rss(r.px))
		}
		return nil
	})
	err := g.Wait()
	elapsed := time.Since(start)
	s := summariseSoak(cfg, measured, readings, rssReadings, start)
	s.Rate = float64(changes.Load()) / elapsed.Seconds()
	s.Skipped = int(skipped.Load())
	if err != nil {
		return s, err
	}
	if len(readings) < cap(readings) || len(rssReadings) < cap(rssReadings) {
		return s, fmt.Errorf("the soak ended with %d of %d readings of the proxy's goroutines and %d of %d of its RSS",
			len(readings), cap(readings), len(rssReadings), cap(rssReadings))
	}
	return s, nil
}

// changeOther makes one unmeasured change to s, a Service without real backends:
// its port moved between 80 and 81, or the readiness of its first endpoint flipped.
func changeOther(ctx context.Context, ld *bench.Loader, s *bench.Svc, port bool) error {
	if port {
		svc := s.Object.DeepCopy()
		svc.Spec.Ports[0].Port = 161 - svc.Spec.Ports[0].Port // 80 <-> 81
		got, err := ld.Lab.Client.CoreV1().Services(svc.Namespace).Update(ctx, svc, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("move the port of %s: %w", s.Name, err)
		}
		s.Object = got
		return nil
	}
	sl := s.Slice.DeepCopy()
	c := &sl.Endpoints[0].Conditions
	ready := c.Ready == nil || *c.Ready // nil means ready
	ready = !ready
	c.Ready = &ready
	got, err := ld.Lab.Client.DiscoveryV1().EndpointSlices(sl.Namespace).Update(ctx, sl, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("flip an endpoint of %s: %w", s.Name, err)
	}
	s.Slice = got
	return nil
}

// summariseSoak cuts the measured changes and the readings into windows: readings
// one every soakSample, rssReadings one every rssSample.
func summariseSoak(cfg SoakConfig, measured []bench.Change, readings []soakReading, rssReadings []float64, start time.Time) *Soak {
	s := &Soak{Services: cfg.Services, Duration: cfg.Duration, Window: cfg.Window, Target: cfg.Rate,
		GoroutinesFirstMinute: -1, GoroutinesEnd: -1, GoroutinesMin: -1, GoroutinesMax: -1}
	per := int(cfg.Window / soakSample)
	at := func(k int) (soakReading, bool) { // the reading taken k soakSamples in
		if k < 1 || k > len(readings) {
			return soakReading{goroutines: -1}, false
		}
		return readings[k-1], true
	}
	var prev int64
	for end := per; end <= len(readings); end += per {
		rd, _ := at(end)
		w := SoakWindow{End: time.Duration(end) * soakSample, Changes: int(rd.changes - prev), Goroutines: rd.goroutines}
		w.RSS = peak(rssReadings, w.End-cfg.Window, w.End)
		prev = rd.changes
		from := start.Add(w.End - cfg.Window)
		var lats []float64
		for _, c := range measured {
			if !c.Written.Before(from) && c.Written.Before(start.Add(w.End)) {
				lats = append(lats, c.Latency().Seconds())
				if c.Capped {
					w.Capped++
				}
			}
		}
		w.Measured = len(lats)
		if len(lats) > 0 {
			sec := func(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }
			w.P50, w.P99, w.Max = sec(bench.Percentile(lats, 50)), sec(bench.Percentile(lats, 99)), sec(slices.Max(lats))
		}
		s.Windows = append(s.Windows, w)
	}
	minute := int(soakReference / soakSample)
	for _, rd := range readings {
		s.GoroutineReadings = append(s.GoroutineReadings, rd.goroutines)
	}
	s.RSSReadings = rssReadings
	if read := time.Duration(len(rssReadings)) * rssSample; read >= soakReference {
		s.RSSFirstMinute = peak(rssReadings, 0, soakReference)
		s.RSSEnd = peak(rssReadings, read-soakReference, read)
		s.RSSMin, s.RSSMax = bench.MinMax(rssReadings)
	}
	if rd, ok := at(minute); ok {
		s.GoroutinesFirstMinute = rd.goroutines
	}
	if rd, ok := at(len(readings)); ok {
		s.GoroutinesEnd = rd.goroutines
	}
	for _, n := range s.GoroutineReadings {
		if n < 0 {
			continue
		}
		if s.GoroutinesMin < 0 || n < s.GoroutinesMin {
			s.GoroutinesMin = n
		}
		s.GoroutinesMax = max(s.GoroutinesMax, n)
	}
	return s
}

// peak is the highest of the RSS readings taken in (from, to] after the start (the
// k-th reading, from 1, is taken k rssSamples in); 0 when there is none.
func peak(rss []float64, from, to time.Duration) float64 {
	lo, hi := int(from/rssSample), min(int(to/rssSample), len(rss))
	if lo >= hi {
		return 0
	}
	return slices.Max(rss[lo:hi])
}

func p99Line(s *Soak) string {
	lo, hi := s.P99Range()
	return fmt.Sprintf("%s to %s", fmtDur(lo), fmtDur(hi))
}

func verdictLine(s *Soak, rssOK, goroutinesOK, p99OK bool) string {
	return fmt.Sprintf("RSS %s, goroutines %s, p99 %s",
		mark(rssOK, "within 10%", "grew over 10%"), mark(goroutinesOK, "flat", "grew"), p99Verdict(s, p99OK))
}
