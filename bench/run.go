package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/test/lab"
)

// Scenario names, for Config.Scenarios.
const (
	ScenarioSync      = "sync"
	ScenarioChange    = "change"
	ScenarioDataplane = "dataplane"
	ScenarioRate      = "rate"
	// ScenarioStateAPI fetches kproxy's state API and status page after each
	// initial sync (MeasureStateAPI); upstream serves none.
	ScenarioStateAPI = "stateapi"
)

// Proxy modes, for Config.Modes and VMPlan.Modes.
const (
	ModeNFTables = "nftables"
	ModeIPTables = "iptables"
	// ModeIPVS runs in the test VM only (VMPlan): this host's kernel has no IP_VS.
	ModeIPVS = "ipvs"
)

// Modes are the proxy modes the harness measures in the host's lab.
var Modes = []string{ModeNFTables, ModeIPTables}

// VMModes are the modes it measures in the test VM (VMPlan).
var VMModes = []string{ModeIPVS}

// Config is one benchmark run.
type Config struct {
	Proxies []Proxy // compared in this order; the ratio is Proxies[0]/Proxies[1]
	// Modes are the proxy modes measured, in this order; every scenario runs in each,
	// for every proxy (both started in that mode).
	Modes     []string
	Sizes     []int // Service counts, ascending (loaded incrementally)
	Scenarios []string
	// Repeat is the initial-sync repetitions per size; 0 means 3 up to 10,000 Services
	// and 1 above (upstream takes minutes there).
	Repeat int
	Cap    time.Duration // bound of one initial sync
	// SampleSize is how many real Services the sync check probes.
	SampleSize int
	// ChangeSize is the size at which change latency is measured; Changes per proxy.
	ChangeSize int
	Changes    int
	// ChangeBound bounds one change (DefaultChangeBound when 0).
	ChangeBound time.Duration
	// ChangeGap separates changes: GapDefault with the default minSyncPeriod (1s, so
	// that the rate limit does not decide the figure), GapZero with minSyncPeriod 0.
	GapDefault, GapZero time.Duration
	// DataplaneSizes get the connect-latency and connection-rate measurements (0 means
	// "only the probed Service").
	DataplaneSizes []int
	Connects       int
	RateWorkers    int
	RateDuration   time.Duration
	LoadWorkers    int
	// ModeSizes, when it has an entry for a mode, are the only Service counts measured
	// in that mode (besides the 0-Service dataplane baseline), and the change latency of
	// that mode is measured at the largest of them when ChangeSize is not one. It exists
	// for iptables mode, whose full restore through iptables-nft 1.8.9 takes minutes
	// from a few thousand Services on, for upstream and kproxy alike (docs/iptables.md).
	ModeSizes map[string][]int
	// HeapProfileDir, when set, is the results directory: the in-use heap profile of
	// each proxy after its first initial sync at each measured size is saved in its
	// <run timestamp>-heap/ (SaveHeapProfile), beside the run's results.
	HeapProfileDir string
	// VM, when set, measures its modes in the test VM too (see VMPlan).
	VM *VMPlan
}

// measures reports whether size is measured in mode (see ModeSizes).
func (c Config) measures(mode string, size int) bool {
	allowed, ok := c.ModeSizes[mode]
	return !ok || size == 0 || slices.Contains(allowed, size)
}

// changeSize is the Service count at which mode's change latency is measured.
func (c Config) changeSize(mode string) int {
	allowed, ok := c.ModeSizes[mode]
	if !ok || slices.Contains(allowed, c.ChangeSize) || len(allowed) == 0 {
		return c.ChangeSize
	}
	return slices.Max(allowed)
}

// changeBound is ChangeBound or its default.
func (c Config) changeBound() time.Duration {
	if c.ChangeBound > 0 {
		return c.ChangeBound
	}
	return DefaultChangeBound
}

// Has reports whether scenario s is enabled.
func (c Config) Has(s string) bool { return slices.Contains(c.Scenarios, s) }

func (c Config) repeat(size int) int {
	if c.Repeat > 0 {
		return c.Repeat
	}
	if size > 10000 {
		return 1
	}
	return 3
}

// Figures are one proxy's results at one size.
type Figures struct {
	Sync, CPU, RSS Sample
	// SteadyRSS is VmRSS read with RSS (VmHWM), just before the proxy is stopped,
	// after the scenarios of its run: what a synced proxy holds.
	SteadyRSS                 Sample
	ChangeDefault, ChangeZero *ChangeResult
	Latency                   *ConnectLatency
	Rate                      *ConnectionRate
	StateAPI                  *StateAPIResult
	Errors                    []string
}

// Results of a run: Figures[mode][size][proxy name].
type Results struct {
	Config  Config
	Figures map[string]map[int]map[string]*Figures
	Load    map[int]time.Duration // loading time per size step
	Started time.Time
	Elapsed time.Duration
	// VMKernel is the release of the VM's kernel, when modes ran there (VMPlan).
	VMKernel string `json:",omitempty"`
}

func (r *Results) fig(mode string, size int, proxy string) *Figures {
	if r.Figures[mode] == nil {
		r.Figures[mode] = map[int]map[string]*Figures{}
	}
	bySize := r.Figures[mode]
	if bySize[size] == nil {
		bySize[size] = map[string]*Figures{}
	}
	if bySize[size][proxy] == nil {
		bySize[size][proxy] = &Figures{}
	}
	return bySize[size][proxy]
}

// Runner runs the benchmark in a started lab.
type Runner struct {
	Lab    *lab.Lab
	Config Config
	Client *lab.Pod
	Loader *Loader
	// VM measures Config.VM's modes (VMHost); nil without Config.VM.
	VM VMMeasurer

	heapDir string // set by Run from Config.HeapProfileDir
}

// NewRunner uses the first pod of node1 as the client and every other pod as backend.
func NewRunner(l *lab.Lab, c Config) *Runner {
	var backends []*lab.Pod
	for _, p := range l.Pods {
		if p != l.Node1.Pods[0] {
			backends = append(backends, p)
		}
	}
	return &Runner{Lab: l, Config: c, Client: l.Node1.Pods[0], Loader: &Loader{Lab: l, Backends: backends, Workers: c.LoadWorkers}}
}

// Run runs every enabled scenario at every size in every mode (the objects of a size
// are loaded once and shared by the modes); a failing measurement is recorded in the
// results and the run goes on.
func (rn *Runner) Run(ctx context.Context) (*Results, error) {
	logger := klog.FromContext(ctx)
	c := rn.Config
	res := &Results{Config: c, Figures: map[string]map[int]map[string]*Figures{}, Load: map[int]time.Duration{}, Started: time.Now()}
	defer func() { res.Elapsed = time.Since(res.Started) }()
	if c.HeapProfileDir != "" {
		rn.heapDir = filepath.Join(c.HeapProfileDir, res.Started.UTC().Format(ResultsStamp)+"-heap")
	}

	sizes := append([]int(nil), c.Sizes...)
	for _, s := range slices.Concat(c.DataplaneSizes, c.VM.sizes()) {
		if !slices.Contains(sizes, s) {
			sizes = append(sizes, s)
		}
	}
	slices.Sort(sizes)
	for _, size := range sizes {
		n := max(size, 1)
		type plan struct {
			measureSync, dataplane, change bool
			reps                           int
		}
		plans := map[string]plan{}
		for _, mode := range c.Modes {
			if !c.measures(mode, size) {
				continue
			}
			p := plan{
				measureSync: c.Has(ScenarioSync) && slices.Contains(c.Sizes, size) && size > 0,
				dataplane:   slices.Contains(c.DataplaneSizes, size) && (c.Has(ScenarioDataplane) || c.Has(ScenarioRate)),
				change:      c.Has(ScenarioChange) && size == c.changeSize(mode),
				reps:        1,
			}
			if !p.measureSync && !p.dataplane && !p.change {
				continue
			}
			if p.measureSync {
				p.reps = c.repeat(size)
			}
			plans[mode] = p
		}
		vmModes := c.VM.modesAt(size)
		if len(plans) == 0 && len(vmModes) == 0 {
			continue // nothing measured at this size: not even loaded
		}
		took, err := rn.Loader.LoadTo(ctx, n)
		if err != nil {
			return res, fmt.Errorf("load %d services: %w", n, err)
		}
		res.Load[size] = took
		logger.Info("Loaded", "services", n, "took", took.Round(time.Millisecond))
		for _, mode := range c.Modes {
			pl, ok := plans[mode]
			if !ok {
				continue
			}
			for rep := range pl.reps {
				order := append([]Proxy(nil), c.Proxies...)
				if rep%2 == 1 {
					slices.Reverse(order)
				}
				for _, p := range order {
					if err := ctx.Err(); err != nil {
						return res, err
					}
					f := res.fig(mode, size, p.Name)
					if err := rn.one(ctx, mode, p, n, rep, pl.measureSync, rep == 0 && pl.dataplane, rep == 0 && pl.change, f); err != nil {
						logger.Error(err, "Measurement failed", "mode", mode, "proxy", p.Name, "services", n, "rep", rep)
						f.Errors = append(f.Errors, err.Error())
					}
				}
			}
		}
		for _, mode := range vmModes {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			if err := rn.inVM(ctx, res, mode, n); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// one runs proxy p once in mode at n Services: the initial sync, then (if asked) the
// dataplane and default-minSyncPeriod change measurements on the synced proxy, then a
// restart with minSyncPeriod 0 for the second change series.
func (rn *Runner) one(ctx context.Context, mode string, p Proxy, n, rep int, measureSync, dataplane, change bool, f *Figures) error {
	logger := klog.FromContext(ctx)
	c := rn.Config
	rn.Lab.ResetNode1Dataplane(ctx)
	r, err := Start(rn.Lab, p, mode, fmt.Sprintf("%s-%d-%d", mode, n, rep), StartOptions{})
	if err != nil {
		return err
	}
	defer func() { _ = r.Stop(ctx, rn.Lab) }()
	sample := rn.Loader.Sample(n, c.SampleSize)
	sr, err := WaitSynced(ctx, rn.Lab, r, rn.Client, sample, n, c.Cap)
	if err != nil {
		return err
	}
	logger.Info("Initial sync", "mode", mode, "proxy", p.Name, "services", n, "rep", rep, "took", sr.Duration.Round(time.Millisecond),
		"probes", sr.Probes.Round(time.Millisecond), "elements", sr.Elements.Round(time.Millisecond), "capped", sr.Capped, "cpu", sr.CPUSeconds)
	if measureSync {
		f.Sync.Add(sr.Duration.Seconds(), sr.Capped)
		f.CPU.Add(sr.CPUSeconds, sr.Capped)
		if rn.heapDir != "" && rep == 0 && !sr.Capped {
			if path, err := SaveHeapProfile(ctx, rn.Lab, r, n, rn.heapDir); err != nil {
				f.Errors = append(f.Errors, err.Error())
			} else {
				logger.Info("Heap profile", "mode", mode, "proxy", p.Name, "services", n, "path", path)
			}
		}
	}
	if sr.Capped {
		if measureSync {
			f.RSS.Add(r.PeakRSS(), true)
		}
		return fmt.Errorf("%s: initial sync of %d services not done within %s", p.Name, n, c.Cap)
	}
	target := rn.Loader.Svcs[0]
	if measureSync && rep == 0 && c.Has(ScenarioStateAPI) {
		res, served, err := MeasureStateAPI(ctx, rn.Lab, r, sample[0])
		switch {
		case err != nil:
			return fmt.Errorf("state API: %w", err)
		case served:
			f.StateAPI = res
		}
	}
	if dataplane && c.Has(ScenarioDataplane) {
		lat, err := MeasureConnectLatency(ctx, rn.Client, target, rn.Loader.Backends, c.Connects)
		if err != nil {
			return fmt.Errorf("connect latency: %w", err)
		}
		f.Latency = &lat
	}
	if dataplane && c.Has(ScenarioRate) {
		rate, err := MeasureConnectionRate(ctx, rn.Client, target, rn.Loader.Backends, c.RateWorkers, c.RateDuration)
		if err != nil {
			return fmt.Errorf("connection rate: %w", err)
		}
		f.Rate = &rate
	}
	if change {
		// The default minSyncPeriod's series; in ipvs mode that default is 0, so this
		// run is the minSyncPeriod 0 series and there is no second one.
		gap, into := c.GapDefault, &f.ChangeDefault
		if defaultMinSyncZero(mode) {
			gap, into = c.GapZero, &f.ChangeZero
		}
		cr, err := MeasureChanges(ctx, rn.Loader, r, rn.Client, rn.Loader.Churn(n), c.Changes, gap, c.changeBound())
		if err != nil {
			return fmt.Errorf("changes (default minSyncPeriod): %w", err)
		}
		*into = &cr
	}
	if measureSync {
		f.RSS.Add(r.PeakRSS(), false)
		f.SteadyRSS.Add(r.RSS(), false)
	}
	if err := r.Stop(ctx, rn.Lab); err != nil {
		return err
	}
	if !change || defaultMinSyncZero(mode) {
		return nil
	}
	r0, err := Start(rn.Lab, p, mode, fmt.Sprintf("%s-%d-%d-minsync0", mode, n, rep), StartOptions{MinSyncZero: true})
	if err != nil {
		return err
	}
	defer func() { _ = r0.Stop(ctx, rn.Lab) }()
	sr0, err := WaitSynced(ctx, rn.Lab, r0, rn.Client, sample, n, c.Cap)
	if err != nil {
		return err
	}
	if sr0.Capped {
		return fmt.Errorf("%s (minSyncPeriod 0): initial sync of %d services not done within %s", p.Name, n, c.Cap)
	}
	cr, err := MeasureChanges(ctx, rn.Loader, r0, rn.Client, rn.Loader.Churn(n), c.Changes, c.GapZero, c.changeBound())
	if err != nil {
		return fmt.Errorf("changes (minSyncPeriod 0): %w", err)
	}
	f.ChangeZero = &cr
	return nil
}
