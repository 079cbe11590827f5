package proxycore

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kproxy/kproxy/internal/conntrack"
	"github.com/kproxy/kproxy/internal/dataplane/followup"
	"github.com/kproxy/kproxy/internal/drift"
	"github.com/kproxy/kproxy/internal/metrics"
	"github.com/kproxy/kproxy/internal/model"
)

// Config is what every mode's proxier is configured with besides its renderer and
// its writer. Required: Family and State.
type Config struct {
	Family v1.IPFamily
	// State is the model of Family, fed by the informers.
	State *model.State
	// NodePortIPs returns this family's local addresses that serve NodePorts (when
	// the renderer's NodePortAddresses.All is false). nil keeps the configured ones.
	NodePortIPs func() ([]netip.Addr, error)
	// Conntrack clears stale UDP flows; nil disables the cleanup.
	Conntrack conntrack.Interface
	// Metrics of this family; nil records nothing.
	Metrics *metrics.FamilyMetrics
	// Health and ServiceHealth may be nil.
	Health        followup.HealthUpdater
	ServiceHealth followup.ServiceHealth
	// Recorder receives a Warning event on every Service or EndpointSlice whose data
	// was (partly) skipped; nil records none.
	Recorder events.EventRecorder
	// FullSyncPeriod is how often everything is rewritten even when nothing failed;
	// 0 takes the mode's default.
	FullSyncPeriod time.Duration
	// DriftCheckPeriod is how often a sync first compares the kernel with what was
	// applied, and rewrites everything when they differ (drift.go); 0 never does.
	DriftCheckPeriod time.Duration
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
}

// Core is the shared part of one proxier; see the package documentation.
type Core struct {
	cfg Config
	// FollowUp is the work around the transaction (internal/dataplane/followup).
	FollowUp *followup.Work
	// LastFullSync is when the last full sync started; FullSyncDone sets it when a
	// full sync succeeded.
	LastFullSync time.Time
	commits      model.Precommitter
	// history, failures, series and published serve the state API and the status
	// page (inspect.go, series.go).
	history   *syncRing
	failures  *syncRing
	series    Series
	published atomic.Pointer[Published]
	// lastDriftCheck (Sync goroutine) and lastDrift (any) are drift.go's.
	lastDriftCheck time.Time
	lastDrift      atomic.Pointer[drift.Report]
	nextDriftCheck atomic.Int64
	// lastBegin is when the last sync began (Unix ns); driftRead cancels the drift
	// comparison's kernel read in progress, nil when none is (drift.go: a
	// comparison gives way to syncs).
	lastBegin atomic.Int64
	driftRead atomic.Pointer[context.CancelFunc]

	// syncMu is held by the proxier's Sync (LockForSync), and by a drift
	// comparison while it compares (not while it reads the kernel): it must not
	// see a sync's applied state half-way. writes counts the syncs that wrote to
	// the kernel (under syncMu: CountWrite): a comparison that saw one start is
	// made again. fullSyncRequested is set by RequestFullSync (common.go).
	syncMu            sync.Mutex
	writes            uint64
	fullSyncRequested atomic.Bool
}

// New returns the Core of a proxier of mode ("nftables", "iptables": for errors),
// after filling in cfg's defaults (FullSyncPeriod from defaultFullSyncPeriod, the
// real clock), so that the proxier's copy and the Core's agree; it touches nothing
// else.
func New(mode string, cfg *Config, defaultFullSyncPeriod time.Duration) (*Core, error) {
	if cfg.State == nil {
		return nil, fmt.Errorf("%s proxier for %s: State is required", mode, cfg.Family)
	}
	if cfg.FullSyncPeriod <= 0 {
		cfg.FullSyncPeriod = defaultFullSyncPeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Core{
		history:  newSyncRing(HistoryLen),
		failures: newSyncRing(FailuresLen),
		cfg:      *cfg,
		commits:  model.Precommitter{State: cfg.State},
		FollowUp: followup.New(followup.Config{
			Family:        cfg.Family,
			State:         cfg.State,
			Conntrack:     cfg.Conntrack,
			Metrics:       cfg.Metrics,
			Health:        cfg.Health,
			ServiceHealth: cfg.ServiceHealth,
			Recorder:      cfg.Recorder,
			Clock:         cfg.Clock,
		}),
	}, nil
}

// Begin starts a sync: it takes the time, commits the model and reports the API
// data the model skipped. The logger carries the family.
func (c *Core) Begin(ctx context.Context) (logger klog.Logger, start time.Time, update *model.Update) {
	logger = klog.FromContext(ctx).WithValues("ipFamily", c.cfg.Family)
	start = c.cfg.Clock.Now()
	c.yieldToSync(start)
	update = c.commits.Commit()
	c.FollowUp.ReportProblems(logger, update.Problems)
	return logger, start, update
}

// FullSyncDue reports whether FullSyncPeriod has passed since the last full sync
// at now.
func (c *Core) FullSyncDue(now time.Time) bool {
	return now.Sub(c.LastFullSync) >= c.cfg.FullSyncPeriod
}

// RefreshNodePortIPs lists the node's NodePort addresses again into addrs, unless
// addrs serves all addresses or no lister is configured; it reports whether they
// changed. A listing failure is logged and keeps the previous addresses.
func (c *Core) RefreshNodePortIPs(ctx context.Context, addrs *model.NodePortAddresses) bool {
	if c.cfg.NodePortIPs == nil || addrs.All {
		return false
	}
	ips, err := c.cfg.NodePortIPs()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Failed to list the node's addresses for NodePorts; keeping the previous ones", "ipFamily", c.cfg.Family)
		return false
	}
	if slices.Equal(ips, addrs.IPs) {
		return false
	}
	addrs.IPs = ips
	return true
}

// RenderChanged renders, with render, the view of every ServicePort update lists
// as changed (one whose view is gone is left out), and maps every deleted one to
// nil: the updates every mode's Plan takes.
func RenderChanged[F any](state *model.State, update *model.Update, render func(*model.ServicePortView) F) map[model.ServicePortName]*F {
	out := make(map[model.ServicePortName]*F, len(update.Changed)+len(update.Deleted))
	for _, name := range update.Changed {
		if view := state.View(name); view != nil {
			f := render(view)
			out[name] = &f
		}
	}
	for _, name := range update.Deleted {
		out[name] = nil
	}
	return out
}
