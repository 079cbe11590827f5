// Package syncer schedules the proxier's sync function with upstream kube-proxy's
// "bounded frequency" semantics, and fans one sync out to the proxiers of both IP
// families.
//
// # Runner contract
//
// A Runner owns one work function fn(ctx) (wrote bool, err error) and calls it from
// a single goroutine, the one running Loop(ctx). Nothing else ever calls fn, so fn
// needs no locking against itself.
//
//   - Run() requests a sync and never blocks. While Loop is idle the request runs
//     at once. Requests that arrive while fn runs, or while the runner waits out
//     minInterval, coalesce into exactly one later run.
//   - minInterval is the least time between the end of a run that wrote to the
//     kernel (or failed) and the start of the next (upstream: minSyncPeriod). 0 means
//     no limit. A run that wrote nothing leaves no cooldown; see "How this differs
//     from upstream" below.
//   - maxInterval bounds the time between runs: with no Run() call, fn still runs
//     maxInterval after the previous run ended (upstream passes 1h for nftables and
//     iptables; the caller passes it in).
//   - When fn returns an error, it is retried with exponential back-off: the first
//     retry comes FirstRetryDelay (or minInterval, if longer) after the failure, and
//     each consecutive failure doubles the wait up to retryInterval (upstream:
//     syncPeriod, its fixed retry interval). A transient failure (another program
//     holding the table, a busy kernel) thus heals within about a second instead of
//     a whole syncPeriod, while a persistent one settles at upstream's rate. Run()
//     still runs sooner; a successful run cancels the pending retry and resets the
//     back-off.
//   - Loop does not run fn by itself when it starts: like upstream, the first run
//     happens on the first Run() (the proxier calls it once its informers have
//     synced) or after maxInterval.
//   - Loop returns nil when ctx is cancelled; it returns at once when idle, and after
//     fn returns when fn is running (fn receives the same ctx and should honour it).
//     Loop may be called only once per Runner.
//   - A panic in fn is not recovered: it crashes the process, as upstream's
//     HandleCrash does by default, because a half-applied dataplane is not a state
//     to keep running in.
//
// All timing goes through an injected k8s.io/utils/clock.Clock, so tests drive it
// with clock/testing.FakeClock.
//
// # How this differs from upstream
//
// Upstream's BoundedFrequencyRunner (pkg/proxy/runner) waits minInterval after every
// run, including runs that find nothing to write: the periodic ones, and those
// triggered by events that change nothing in the rules (an EndpointSlice update that
// only touches fields the proxy ignores, a Node update). A change arriving just after
// such a run then waits out the whole cooldown: measured at 10,000 Services with the
// default 1 s, about one change in 50 waited half a second (p99 646 ms against a p50
// of 2.7 ms). Here the SyncFunc reports whether it wrote, and only a run that wrote
// (or failed) starts the cooldown.
//
// This is safe because minInterval exists to bound kernel writes under churn
// (upstream's configuration documents minSyncPeriod as "the minimum period between
// iptables rule resyncs"), and it still does: between two runs that write there is always
// at least minInterval. What a run that writes nothing costs is the model's commit,
// in time proportional to the events it drains, and each such run needs a Run()
// request (an event) to happen at all, so no loop can spin. Failed runs keep the
// cooldown and the back-off below, so a kernel that keeps refusing is not retried
// faster than upstream's bound.
//
// # Dual-stack fan-out
//
// Families is a Syncer that calls Sync on each IP family's proxier, IPv4 first,
// sequentially, and joins their errors (each wrapped with its family). One family
// failing does not stop the other from syncing. One Runner drives Families.Sync, so
// both families share minInterval, maxInterval and the retry: a failure in one
// family makes the retry re-sync both, which the proxiers' partial syncs make cheap.
// This is simpler than upstream's metaproxier (one runner per family) and keeps a
// single sync loop in the process; the health server still tracks each family
// separately because each proxier reports its own QueuedUpdate/Updated.
package syncer
