package prober

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

const (
	// DefaultRate is the probes per second per target.
	DefaultRate = 20
	// DefaultTimeout bounds one probe.
	DefaultTimeout = time.Second
)

// Config configures a Prober.
type Config struct {
	Name    string   // the prober's name in its summaries (its location)
	Targets []Target // at least one
	Rate    float64  // probes per second per target; DefaultRate when zero
	Timeout time.Duration
	// Dial opens the probes' connections; nil means net.Dialer.
	Dial DialFunc
	// Clock stamps and schedules the probes; nil means the real clock. Timeout is
	// enforced with the real clock (it is a socket deadline).
	Clock clock.Clock
	// OnTransition, when set, is called (from the goroutine that completed a probe,
	// never with the Prober's lock held) for each target that starts failing or
	// recovers.
	OnTransition func(Transition)
}

// Prober probes its targets continuously (see the package contract).
type Prober struct {
	cfg  Config
	slot time.Duration // between two launches, over all targets

	mu       sync.Mutex
	window   int
	started  time.Time // of the current window
	trackers []*tracker
	running  bool
}

// New checks cfg and returns a Prober that probes once Run is called.
func New(cfg Config) (*Prober, error) {
	if len(cfg.Targets) == 0 {
		return nil, errors.New("prober: no targets")
	}
	if cfg.Rate == 0 {
		cfg.Rate = DefaultRate
	}
	if cfg.Rate < 0 || math.IsNaN(cfg.Rate) || math.IsInf(cfg.Rate, 0) {
		return nil, fmt.Errorf("prober: rate %v: must be positive", cfg.Rate)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("prober: timeout %v: must be positive", cfg.Timeout)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	slot := time.Duration(float64(time.Second) / (cfg.Rate * float64(len(cfg.Targets))))
	if slot <= 0 {
		return nil, fmt.Errorf("prober: rate %v over %d targets is too high", cfg.Rate, len(cfg.Targets))
	}
	p := &Prober{cfg: cfg, slot: slot}
	now := cfg.Clock.Now()
	p.started = now
	for _, t := range cfg.Targets {
		p.trackers = append(p.trackers, newTracker(t, now))
	}
	return p, nil
}

// Run probes until ctx ends, then waits for the probes in flight (at most Timeout) and
// returns nil. The first window starts when Run starts. Run may be called once.
func (p *Prober) Run(ctx context.Context) error {
	clk := p.cfg.Clock
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return errors.New("prober: Run called twice")
	}
	p.running = true
	start := clk.Now()
	p.started = start
	for _, tr := range p.trackers {
		tr.win = newWindow(start)
	}
	p.mu.Unlock()

	// In-flight probes outlive ctx (see the contract), but keep its values.
	probeCtx := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	n := len(p.trackers)
	for j := int64(0); ; j++ {
		due := start.Add(time.Duration(j) * p.slot)
		now := clk.Now()
		if wait := due.Sub(now); wait > 0 {
			t := clk.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C():
			}
		} else if -wait > time.Duration(n)*p.slot {
			// More than a round behind (the process was stalled): skip the missed
			// slots, keeping the targets' rotation.
			behind := int64(-wait / p.slot)
			j += behind - behind%int64(n)
		}
		if ctx.Err() != nil {
			return nil
		}
		i := int(j % int64(n))
		p.mu.Lock()
		seq := p.trackers[i].launch()
		p.mu.Unlock()
		launched := clk.Now()
		wg.Add(1)
		go func() {
			defer wg.Done()
			backend, err := Probe(probeCtx, p.cfg.Dial, p.cfg.Targets[i], p.cfg.Timeout)
			p.complete(i, seq, result{start: launched, backend: backend, err: err})
		}()
	}
}

func (p *Prober) complete(i int, seq uint64, r result) {
	p.mu.Lock()
	ts := p.trackers[i].complete(seq, r)
	p.mu.Unlock()
	if p.cfg.OnTransition != nil {
		for _, t := range ts {
			p.cfg.OnTransition(t)
		}
	}
}

// Summary is the current window, as of now.
func (p *Prober) Summary() Summary {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.summaryLocked(p.cfg.Clock.Now())
}

// Reset ends the current window, returning its summary, and starts the next one.
func (p *Prober) Reset() Summary {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Clock.Now()
	s := p.summaryLocked(now)
	p.window++
	p.started = now
	for _, tr := range p.trackers {
		tr.reset(now)
	}
	return s
}

func (p *Prober) summaryLocked(end time.Time) Summary {
	s := Summary{
		Prober:  p.cfg.Name,
		Window:  p.window,
		Start:   p.started,
		End:     end,
		Rate:    p.cfg.Rate,
		Timeout: Duration(p.cfg.Timeout),
		Targets: make([]TargetSummary, 0, len(p.trackers)),
	}
	for _, tr := range p.trackers {
		s.Targets = append(s.Targets, tr.summary(end))
	}
	return s
}
