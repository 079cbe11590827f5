package proxycore

// What every mode's Proxier has alike around its Sync: the sync lock and the count
// of kernel writes that a drift comparison checks under it (drift.go), the full
// sync that a drift check or the canary monitor requests, and the methods the
// daemon calls on every proxier (Common).

// LockForSync takes the sync lock for a sync, after making a drift comparison that
// holds or will soon want it give way: comparing a large table under the lock takes
// tens of milliseconds (23 ms at 10,000 Services), which a change waiting behind it
// would add to its latency. The proxier's Sync holds it throughout (UnlockSync).
func (c *Core) LockForSync() {
	c.yieldToSync(c.cfg.Clock.Now())
	c.syncMu.Lock()
}

// UnlockSync releases the sync lock.
func (c *Core) UnlockSync() { c.syncMu.Unlock() }

// WithSyncLock runs fn under the sync lock without making a drift comparison give
// way: for a reader of the applied state that is not a sync.
func (c *Core) WithSyncLock(fn func()) {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	fn()
}

// CountWrite records, under the sync lock, that the sync wrote to the kernel (or
// may have: a refused iptables-restore of the legacy backend commits table by
// table), so that a drift comparison that read the kernel meanwhile is made again.
func (c *Core) CountWrite() { c.writes++ }

// RequestFullSync makes the proxier's next Sync a full one (any goroutine); the
// caller then triggers a sync.
func (c *Core) RequestFullSync() { c.fullSyncRequested.Store(true) }

// TakeFullSyncRequest reports, in Sync, whether a full sync was requested since
// the last call, and clears the request.
func (c *Core) TakeFullSyncRequest() bool { return c.fullSyncRequested.Swap(false) }

// Common is the methods the daemon calls on every mode's Proxier alike; a Proxier
// embeds the one its Core returns.
type Common struct{ core *Core }

// Common returns the daemon-facing methods on c.
func (c *Core) Common() Common { return Common{core: c} }

// Inspectable is what the state API reads of the proxier (any goroutine).
func (h Common) Inspectable() Inspectable { return h.core }

// Precommit commits the model's pending changes ahead of the first sync, for it
// (model.Precommitter); it does nothing once a sync has run. It must be called from
// the goroutine that calls Sync.
func (h Common) Precommit() { h.core.commits.Precommit() }

// RequestFullSync makes the next Sync a full one (any goroutine): a drift check
// that found differences, and the iptables canary monitor when someone flushed the
// tables (upstream's forceSyncProxyRules), call it and then trigger a sync.
func (h Common) RequestFullSync() { h.core.RequestFullSync() }
