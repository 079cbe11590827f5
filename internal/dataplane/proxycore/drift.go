package proxycore

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/drift"
)

// The shared half of drift detection (internal/drift): when a background check
// is due, what the last one found (for the state API), its metrics and its log
// line. Each mode compares its own kernel objects (the proxiers' Verify).

// DriftCheckDue reports whether a background drift check is due at now, at the
// start of a sync that is idle (has nothing to write) or not: one per
// Config.DriftCheckPeriod, on an idle sync (the sync runner runs one every
// syncPeriod when nothing changes), so that a comparison never delays a change;
// under churn that leaves no idle sync, on any sync once two periods have passed.
// None when DriftCheckPeriod is 0.
func (c *Core) DriftCheckDue(now time.Time, idle bool) bool {
	period := c.cfg.DriftCheckPeriod
	if !idle {
		period *= 2
	}
	// A full sync leaves the kernel as applied: it counts as a check.
	last := c.lastDriftCheck
	if c.LastFullSync.After(last) {
		last = c.LastFullSync
	}
	return period > 0 && now.Sub(last) >= period
}

// RecordDrift records a comparison: the time of the last check, the report for the
// state API, kubeproxy_kproxy_drift_objects, and, when something differs, a log
// line with the first differences and a count in
// kubeproxy_kproxy_drift_repairs_total when repair is set (the caller then
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
// proxier's Sync): the next periodic full sync and drift check count from it.
func (c *Core) FullSyncDone(start time.Time) {
	c.LastFullSync = start
	c.publishNextDriftCheck()
}

// publishNextDriftCheck records, for RunDriftTimer, when the next check is due
// (the sync goroutine, after a check or a full sync).
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

// DriftTimerInterval is how often RunDriftTimer looks whether a check is due.
const DriftTimerInterval = time.Second

// RunDriftTimer calls trigger (which requests a sync) once when a drift check
// becomes due, so that the check runs about one DriftCheckPeriod after the last
// one even when nothing else makes the proxier sync: a third party's change is
// then found within one period (plus a second), not at whichever sync comes
// next. It returns nil when ctx is done; with no DriftCheckPeriod it returns at
// once.
func (c *Core) RunDriftTimer(ctx context.Context, trigger func()) error {
	if c.cfg.DriftCheckPeriod <= 0 {
		return nil
	}
	ticker := time.NewTicker(DriftTimerInterval)
	defer ticker.Stop()
	var triggered int64
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		due := c.nextDriftCheck.Load()
		if due != 0 && due != triggered && c.cfg.Clock.Now().UnixNano() >= due {
			triggered = due
			trigger()
		}
	}
}

// LastDrift returns the last drift comparison, nil before the first (any
// goroutine).
func (c *Core) LastDrift() *drift.Report { return c.lastDrift.Load() }

// CheckDrift runs the background comparison when it is due (DriftCheckDue), on
// the sync goroutine at the start of a sync: verify compares the kernel with what
// was applied (mayskip: it may skip a comparison it knows would find nothing). It
// records the result and reports whether the kernel differs, which makes that sync
// a full one. A failed comparison is logged and rewrites nothing: the periodic
// full sync still runs.
func (c *Core) CheckDrift(ctx context.Context, idle bool, verify func(ctx context.Context, mayskip bool) (*drift.Report, error)) bool {
	now := c.cfg.Clock.Now()
	if !c.DriftCheckDue(now, idle) {
		return false
	}
	r, err := verify(ctx, true)
	if err != nil {
		c.RecordDrift(ctx, &drift.Report{Family: string(c.cfg.Family), Checked: now, Skipped: true}, false)
		klog.FromContext(ctx).Error(err, "Failed to compare the kernel's rules with what was applied", "ipFamily", c.cfg.Family)
		return false
	}
	c.RecordDrift(ctx, r, r.Count > 0)
	return r.Count > 0
}
