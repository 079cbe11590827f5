package proxycore

import (
	"context"
	"errors"
	"time"

	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/drift"
)

// The shared half of drift detection (internal/drift): running a comparison of
// the kernel with what was applied without holding the proxier's sync lock while
// the kernel is read, running one every Config.DriftCheckPeriod, and what the last
// one found (for the state API), its metrics and its log line. Each mode supplies
// its own halves (DriftComparison).

// ErrNothingApplied is a comparison's error before the proxier's first successful
// sync.
var ErrNothingApplied = errors.New("nothing applied yet: the first sync has not succeeded")

// ErrInconclusive is a comparison's error when the kernel or what was applied
// changed while it read the kernel: it must be made again.
var ErrInconclusive = errors.New("the rules changed during the comparison")

// DriftComparison is one mode's comparison of the kernel with what it applied, in
// two halves so that the sync loop is never held up by the kernel's listing (at
// 10,000 Services, a few hundred milliseconds): Read runs with no lock held; then
// Compare runs under the Core's sync lock, unless the proxier wrote (CountWrite)
// or, where the kernel counts them, anyone committed (Generation) in between.
type DriftComparison[K any] struct {
	// Generation, when set, changes with every commit to the kernel's rules by
	// anyone (nftables' ruleset generation): a read it brackets is consistent,
	// and a check at the generation of the last one that found nothing is skipped.
	Generation func(ctx context.Context) (uint32, error)
	// Read lists the kernel's rules; no lock is held.
	Read func(ctx context.Context) (K, error)
	// Compare, under the sync lock, adds to r how kernel differs from what the proxier
	// applied; ErrNothingApplied before its first successful sync.
	Compare func(ctx context.Context, kernel K, r *drift.Report) error
}

// maxInconclusive bounds the attempts of CompareDrift's caller Verify when syncs
// keep changing the rules during the comparison.
const maxInconclusive = 5

// CompareDrift compares the kernel with what was applied now (the proxier's
// Verify, from any goroutine); it tries again while the rules change under it,
// a few times.
func CompareDrift[K any](ctx context.Context, c *Core, dc *DriftComparison[K]) (*drift.Report, error) {
	var err error
	for range maxInconclusive {
		var r *drift.Report
		if r, err = compareOnce(ctx, c, dc, nil); !errors.Is(err, ErrInconclusive) {
			return r, err
		}
	}
	return nil, err
}

// cleanStamp is what a comparison that found nothing was made at.
type cleanStamp struct {
	generation uint32
	writes     uint64
}

// compareOnce makes one comparison. With clean set, a comparison at the stamp it
// holds is skipped (a report with Skipped), and clean is updated.
func compareOnce[K any](ctx context.Context, c *Core, dc *DriftComparison[K], clean **cleanStamp) (*drift.Report, error) {
	start := c.cfg.Clock.Now()
	r := &drift.Report{Family: string(c.cfg.Family), Checked: start}
	c.syncMu.Lock()
	w0 := c.writes
	c.syncMu.Unlock()
	var g0 uint32
	if dc.Generation != nil {
		var err error
		if g0, err = dc.Generation(ctx); err != nil {
			return nil, err
		}
		if clean != nil && *clean != nil && **clean == (cleanStamp{g0, w0}) {
			r.Skipped = true
			return r, nil
		}
	}
	// readCtx is cancelled by a sync that wants the lock (yieldToSync): from here
	// until the comparison ends, whether it is reading the kernel or comparing
	// under the lock, it gives way to the sync and is made again later.
	readCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.driftRead.Store(&cancel)
	defer c.driftRead.Store(nil)
	yielded := func() bool { return readCtx.Err() != nil && ctx.Err() == nil }
	kernel, err := dc.Read(readCtx)
	if err != nil {
		if yielded() {
			return nil, ErrInconclusive
		}
		return nil, err
	}
	if dc.Generation != nil {
		g1, err := dc.Generation(ctx)
		if err != nil {
			return nil, err
		}
		if g1 != g0 {
			return nil, ErrInconclusive
		}
	}
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	// A sync that announced itself before the read registered readCtx could not
	// cancel it, but its lastBegin is later than start.
	if c.writes != w0 || c.lastBegin.Load() > start.UnixNano() {
		return nil, ErrInconclusive
	}
	if err := dc.Compare(readCtx, kernel, r); err != nil {
		if yielded() {
			return nil, ErrInconclusive
		}
		return nil, err
	}
	r.Duration = c.cfg.Clock.Since(start).Seconds()
	if clean != nil {
		*clean = nil
		if r.Count == 0 && dc.Generation != nil {
			*clean = &cleanStamp{g0, w0}
		}
	}
	return r, nil
}

// DriftCheckInterval is how often RunDriftChecks looks whether a check is due.
const DriftCheckInterval = time.Second

// DriftQuiet is how long after a sync began RunDriftChecks waits before it reads
// the kernel. Reading a large table competes with the syncs for the CPU and the
// collector (at 10,000 Services a read is 0.3 s of CPU and tens of MB allocated
// in the GC scope for whole-table work), and while it ran each single-change sync
// took 15-50 ms instead of 3-5 ms (bench/results/20261206T042909Z-phases.md). A
// read that starts in a lull of DriftQuiet usually ends before the next change
// (syncs that write are at least minSyncPeriod apart, 1 s by default); one that
// does not is cancelled by the sync that begins (yieldToSync) and tried again.
const DriftQuiet = 500 * time.Millisecond

// yieldToSync is called as a sync begins at start, and before it takes the sync
// lock (LockForSync): a drift comparison reading the kernel, or comparing under
// the lock, stops and is made again in a later lull.
func (c *Core) yieldToSync(start time.Time) {
	c.lastBegin.Store(start.UnixNano())
	if cancel := c.driftRead.Load(); cancel != nil {
		(*cancel)()
	}
}

// quiet reports whether no sync began within DriftQuiet of now.
func (c *Core) quiet(now time.Time) bool {
	return now.UnixNano()-c.lastBegin.Load() >= int64(DriftQuiet)
}

// RunDriftChecks compares the kernel with what was applied once per
// Config.DriftCheckPeriod, counted from the last comparison or full sync, until
// ctx is done (it returns nil then; at once without a period). When they differ
// it records and logs the differences, then requests a full sync and calls
// trigger: the proxier's next sync, right away, rewrites everything. A third party's change is
// so found within one period (and a second) on a node whose Services ever pause
// for DriftQuiet. A comparison gives way to syncs: it starts only in such a lull,
// and one that a sync interrupts, or that ran while the rules changed, is made
// again a second later; a failed one is logged and waits a period.
func RunDriftChecks[K any](ctx context.Context, c *Core, dc *DriftComparison[K], trigger func()) error {
	if c.cfg.DriftCheckPeriod <= 0 {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("ipFamily", c.cfg.Family)
	ticker := time.NewTicker(DriftCheckInterval)
	defer ticker.Stop()
	var clean *cleanStamp
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		now := c.cfg.Clock.Now()
		due := c.nextDriftCheck.Load()
		if due == 0 || now.UnixNano() < due || !c.quiet(now) {
			continue
		}
		r, err := compareOnce(ctx, c, dc, &clean)
		switch {
		case errors.Is(err, ErrInconclusive), errors.Is(err, ErrNothingApplied), ctx.Err() != nil:
			continue
		case err != nil:
			if err.Error() != lastErr {
				logger.Error(err, "Failed to compare the kernel's rules with what was applied")
			}
			lastErr = err.Error()
			r = &drift.Report{Family: string(c.cfg.Family), Checked: c.cfg.Clock.Now(), Skipped: true}
		default:
			lastErr = ""
		}
		c.syncMu.Lock()
		c.RecordDrift(ctx, r, r.Count > 0)
		c.syncMu.Unlock()
		if r.Count > 0 {
			c.RequestFullSync()
			trigger()
		}
	}
}

// RecordDrift records a comparison (under the proxier's sync lock): the time of
// the last check, the report for the state API, kubeproxy_kproxy_drift_objects,
// and, when something differs, a log line with the first differences and a count
// in kubeproxy_kproxy_drift_repairs_total when repair is set (the caller then
// rewrites everything).
func (c *Core) RecordDrift(ctx context.Context, r *drift.Report, repair bool) {
	c.lastDriftCheck = r.Checked
	c.publishNextDriftCheck()
	c.lastDrift.Store(r)
	if r.Skipped {
		return
	}
	c.cfg.Metrics.SetDriftObjects(r.Count)
	if r.Count == 0 {
		return
	}
	first := make([]string, 0, 5)
	for _, d := range r.Differences[:min(len(r.Differences), 5)] {
		first = append(first, d.String())
	}
	logger := klog.FromContext(ctx)
	if repair {
		c.cfg.Metrics.IncDriftRepairs()
		logger.Info("The kernel's rules differ from what kproxy applied; rewriting them with a full sync",
			"ipFamily", c.cfg.Family, "differences", r.Count, "first", first)
		return
	}
	logger.Info("The kernel's rules differ from what kproxy applied", "ipFamily", c.cfg.Family, "differences", r.Count, "first", first)
}

// FullSyncDone records that a full sync that started at start succeeded (the
// proxier's Sync, under its sync lock): the next periodic full sync and drift
// check count from it.
func (c *Core) FullSyncDone(start time.Time) {
	c.LastFullSync = start
	c.publishNextDriftCheck()
}

// publishNextDriftCheck records, for RunDriftChecks, when the next check is due:
// a period after the last check or full sync (a full sync leaves the kernel as
// applied).
func (c *Core) publishNextDriftCheck() {
	if c.cfg.DriftCheckPeriod <= 0 {
		return
	}
	last := c.lastDriftCheck
	if c.LastFullSync.After(last) {
		last = c.LastFullSync
	}
	c.nextDriftCheck.Store(last.Add(c.cfg.DriftCheckPeriod).UnixNano())
}

// LastDrift returns the last drift comparison, nil before the first (any
// goroutine).
func (c *Core) LastDrift() *drift.Report { return c.lastDrift.Load() }
