package proxycore

import (
	"net/netip"
	"sync"
	"time"

	"github.com/kproxy/kproxy/internal/drift"
	"github.com/kproxy/kproxy/internal/model"
)

// What a proxier offers the state API (internal/inspect) and the status page
// (internal/statuspage), from any goroutine: its last syncs (Syncs), its last
// failed ones (Failures), the last hour of syncs in fixed buckets (Series, see
// series.go) and, as of its last write, its node-level settings and a way to
// describe the kernel objects of one ServicePort (Published). Nothing here copies
// rules or model state: a description is rendered when someone asks.

// SyncRecord is what the state API shows of one sync.
type SyncRecord struct {
	Start    time.Time
	Duration time.Duration
	// Full: the whole ruleset was written (else only what changed).
	Full bool
	// Wrote: something was sent to the kernel (a sync that finds nothing to write
	// still commits the model and runs the follow-up work).
	Wrote bool
	// Changed and Deleted count the ServicePorts the sync's model update changed
	// and deleted.
	Changed, Deleted int
	// Operations is the number of kernel operations of an nftables transaction
	// (0 in iptables mode, which writes iptables-restore input instead).
	Operations int
	// Err is the sync's error, nil when it succeeded.
	Err error
}

// HistoryLen is how many syncs a proxier keeps for the state API: at the default 1 s minSyncPeriod,
// the last minute or more of a busy node, in a few kilobytes.
const HistoryLen = 64

// syncRing keeps the last len(ring) SyncRecords of one proxier: the last
// HistoryLen syncs, and (series.go) the last FailuresLen failed ones. Add is called
// from the sync goroutine, Records from any.
type syncRing struct {
	mu   sync.Mutex
	ring []SyncRecord
	next int
	n    int
}

func newSyncRing(size int) *syncRing { return &syncRing{ring: make([]SyncRecord, size)} }

// Add records one sync, dropping the oldest when full.
func (h *syncRing) Add(r SyncRecord) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring[h.next] = r
	h.next = (h.next + 1) % len(h.ring)
	h.n = min(h.n+1, len(h.ring))
}

// Records returns the kept syncs, newest first.
func (h *syncRing) Records() []SyncRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]SyncRecord, 0, h.n)
	for i := 1; i <= h.n; i++ {
		out = append(out, h.ring[(h.next-i+len(h.ring))%len(h.ring)])
	}
	return out
}

// Published is what a proxier last wrote with: its node-level settings and the
// renderer that describes one ServicePort's kernel objects with them.
type Published struct {
	NodePortAddresses model.NodePortAddresses
	LocalDetector     model.LocalDetector
	// ServiceCIDRs: nftables mode only (traffic to an unallocated ClusterIP is
	// rejected); nil in iptables mode.
	ServiceCIDRs []netip.Prefix
	// Describe renders view with the settings above and returns its kernel objects
	// as text lines (the mode's Fragment.Describe).
	Describe func(view *model.ServicePortView) []string
}

// Record adds to the kept syncs (HistoryLen) the sync that began at start with update: whether it was
// full and wrote to the kernel, its kernel operations (nftables) and its error. It
// also counts the sync, with the network programming latencies that FollowUp
// observed for it, in the time series, and keeps it among the failures when err is
// not nil. Call it last in a sync, after FollowUp.
func (c *Core) Record(start time.Time, update *model.Update, full, wrote bool, operations int, err error) {
	r := SyncRecord{
		Start: start, Duration: c.cfg.Clock.Since(start), Full: full, Wrote: wrote,
		Changed: len(update.Changed), Deleted: len(update.Deleted), Operations: operations, Err: err,
	}
	c.history.Add(r)
	// Taken on failures too, so that nothing observed before is counted late.
	c.series.Add(start, r.Duration, err != nil, c.FollowUp.TakeProgramming())
	if err != nil {
		c.failures.Add(r)
	}
}

// Publish records, from the sync goroutine after a successful write, what the
// proxier wrote with. The slices in p must not be modified afterwards (the
// proxiers replace them, never write into them).
func (c *Core) Publish(p Published) { c.published.Store(&p) }

// Syncs returns the proxier's last syncs, newest first (any goroutine).
func (c *Core) Syncs() []SyncRecord { return c.history.Records() }

// Failures returns the proxier's last FailuresLen failed syncs, newest first (any
// goroutine).
func (c *Core) Failures() []SyncRecord { return c.failures.Records() }

// Series returns the proxier's syncs of the last SeriesSpan, per SeriesStep bucket
// with syncs, oldest first (any goroutine).
func (c *Core) Series() []SeriesPoint { return c.series.Points(c.cfg.Clock.Now()) }

// Published returns what the proxier last wrote with, nil before its first
// successful write (any goroutine).
func (c *Core) Published() *Published { return c.published.Load() }

// Inspectable is what the state API reads of one proxier; Core implements it.
type Inspectable interface {
	Syncs() []SyncRecord
	Failures() []SyncRecord
	Series() []SeriesPoint
	Published() *Published
	// LastDrift is the last comparison of the kernel with what was applied.
	LastDrift() *drift.Report
}

var _ Inspectable = (*Core)(nil)

// Describer is Published.Describe for a mode whose renderer renders one
// ServicePort under cfg to a fragment that describes itself (every mode's
// RenderService and Fragment.Describe).
func Describer[C, F any, PF interface {
	*F
	Describe() []string
}](cfg *C, render func(*C, *model.ServicePortView) F) func(*model.ServicePortView) []string {
	return func(v *model.ServicePortView) []string {
		f := render(cfg, v)
		return PF(&f).Describe()
	}
}
