// Package proxycore is the part of a proxier that every dataplane mode shares, so
// that the nftables and iptables proxiers differ only in what they render and how
// they write it:
//
//   - Config: what a proxier is configured with besides its renderer and its writer
//     (family, model, node addresses, conntrack, metrics, health, Events, clock).
//   - Core: commits the model, also ahead of the first sync (Precommit), reports the
//     API data the model skipped, keeps the time of the last full sync, refreshes
//     the node's NodePort addresses, and owns the follow-up work of a sync
//     (internal/dataplane/followup).
//   - The skeleton around every mode's Sync (common.go): the sync lock
//     (LockForSync, UnlockSync), the count of kernel writes a drift comparison
//     checks under it (CountWrite), full-sync requests (RequestFullSync,
//     TakeFullSyncRequest), and Common, the daemon-facing methods (Inspectable,
//     Precommit, RequestFullSync) that each Proxier embeds instead of forwarding.
//   - What the state API (internal/inspect) and the status page
//     (internal/statuspage) read of a proxier, from any goroutine (inspect.go,
//     series.go): the last HistoryLen syncs (Record, Syncs), the last FailuresLen
//     failed ones (Failures), the last hour of syncs in SeriesLen buckets of
//     SeriesStep (Series: count, failures, sum and max of the durations and of the
//     network programming latencies; fixed size, whatever the number of Services
//     or the uptime), and what the last write used (Publish, Published: NodePort
//     addresses, local detector, ServiceCIDRs, and a function that renders one
//     ServicePort's kernel objects as text). Nothing rendered is kept for it.
//   - Drift detection's shared half (drift.go): a mode's comparison of the kernel
//     with what it applied, split so that the kernel is read without the sync
//     lock and compared under it, made again when the rules changed meanwhile
//     or a sync wanted the lock (DriftComparison, CompareDrift; a proxier's Sync
//     takes the Core's sync lock with LockForSync, which makes the comparison
//     give way); one every Config.DriftCheckPeriod, which requests and triggers a
//     full sync when something differs (RunDriftChecks); and what the last one
//     found (RecordDrift, LastDrift, kubeproxy_kproxy_drift_objects and
//     _repairs_total, the log line).
//   - RenderChanged: renders the ServicePorts an update changed, with a nil fragment
//     for each deleted one, which is what every mode's Plan takes.
//
// Contract: New has no side effects; a Core belongs to one proxier and is called
// from its Sync goroutine only, except what says otherwise (RequestFullSync,
// the state API's readers, drift checks). Nothing here decides which rules to write.
package proxycore
