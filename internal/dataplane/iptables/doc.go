// Package iptables is the thin dataplane layer of kproxy's iptables mode: one Proxier
// per IP family turns the model's committed changes into rendered fragments
// (internal/render/iptables), writes only the difference from what it last applied
// with one iptables-restore --noflush (internal/iptables), and then does the
// follow-up work of a sync shared with the nftables mode (internal/dataplane/followup):
// stale UDP conntrack flows, service health-check ports, metrics and /healthz.
//
// Contract:
//   - New has no side effects; nothing touches iptables before the first Sync.
//   - The first Sync, the first after a failure, the first after RequestFullSync
//     (the canary monitor noticed a flush), the one where the cluster crosses
//     upstream's large-cluster threshold (1000 endpoints: endpoint rules lose their
//     comments), and one every FullSyncPeriod (not in large clusters, as upstream)
//     are full: the jumps from the built-in chains are ensured, every chain of kproxy
//     is declared and rewritten, and per-ServicePort chains no Service renders are
//     deleted, including those a previous kube-proxy left (found with iptables-save
//     of the nat table). Every other Sync restores only the changed ServicePorts'
//     chains and shared-chain entries, and nothing at all when nothing changed.
//   - A failed partial restore is counted in
//     kubeproxy_sync_proxy_rules_iptables_restore_failures_total and
//     ..._partial_restore_failures_total, and followed by a full sync in the same
//     Sync. A failed full restore is counted in ..._restore_failures_total and
//     returned, so the sync runner retries with back-off; the work of the failed
//     update (conntrack cleanup, health check ports) waits for the sync that
//     succeeds. kubeproxy_sync_proxy_rules_iptables_total counts the rules of
//     kproxy's chains per table, ..._iptables_last those the last restore wrote.
//   - Drift (drift.go): Verify, from any goroutine, and RunDriftChecks, once per
//     DriftCheckPeriod, compare iptables-save of the filter and nat tables (read
//     with no lock held) with the applied state under the sync lock: kproxy's
//     chains rule by rule, the jumps from the built-in chains, no stale
//     per-ServicePort chain. Differences make the next sync, triggered at once, a
//     full one (RequestFullSync). A comparison gives way to syncs: it looks at its
//     context every 1,024 chains, which LockForSync cancels.
//   - Sync must be called from one goroutine (the sync runner). RequestFullSync and
//     Verify may be called from any goroutine.
package iptables
