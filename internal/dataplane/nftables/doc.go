// Package nftables is the thin dataplane layer of kproxy's nftables mode: one Proxier
// per IP family turns the model's committed changes into rendered fragments
// (internal/render/nftables), writes only the difference from what it last applied
// as one atomic transaction of typed operations (nft.Op), and then does the follow-up work of a sync:
// stale UDP conntrack flows, service health-check ports, metrics and /healthz.
//
// Contract:
//   - New has no side effects; nothing touches the kernel before the first Sync.
//   - The first Sync, the first after a failed transaction, and one every
//     FullSyncPeriod are full syncs: they list the names of the table's chains, sets,
//     maps and counters (ListAll) and rewrite the whole table in place in one atomic
//     transaction (render.RefreshOps), which keeps what the packet path stored in the session-affinity
//     sets. When the listing fails, or the kernel refuses the refresh (an existing
//     object's definition changed), the same Sync replaces the table instead ("add
//     table; delete table; add table; ...", render.FullOps), which
//     resets affinity; not when the refresh failed because the netlink socket did
//     (nftnetlink.IsSocketError): the sync fails, and its retry refreshes. Every other Sync writes only the fragments of the
//     ServicePorts that changed.
//   - Every sync, full (render.FullOps, RefreshOps) or partial (render.Plan.Ops),
//     is a stream of typed operations: encoded as one atomic netlink batch, with
//     no knftables objects and no text, when Config.NFT implements OpsRunner (the
//     netlink writer, nftnetlink.Executor); otherwise (the nft binary, a Fake)
//     added to one knftables transaction (render.AddOps).
//   - A failed transaction leaves the kernel on the previous whole state (nft
//     transactions are atomic), is counted in
//     kubeproxy_sync_proxy_rules_nftables_sync_failures_total, and is returned so the
//     sync runner retries with back-off; /healthz turns unhealthy when queued changes
//     stay unapplied past the health timeout. A netlink socket that fails after
//     the kernel took the batch leaves the outcome unknown (nftnetlink's doc): it
//     is a failure all the same. Either way the proxier forgets what it applied,
//     so the retry is a full sync from the model, on a new socket
//     (TestKernelSocketFaults fails the socket of real syncs with the kernel's
//     errnos).
//   - Drift (drift.go, with Config.Inventories): Verify, from any goroutine, and
//     RunDriftChecks, once per DriftCheckPeriod, compare the kernel's table with
//     what was applied (proxycore.DriftComparison): the table is read over netlink
//     with no lock held, then compared under the sync lock with the inventory of
//     what was applied, which a full sync reads from its own batch
//     (InventoryRunner: nftnetlink.Executor.RunOpsInventory) and every partial
//     sync keeps up from its operations (nftnetlink.ApplyToInventory); with a
//     writer that cannot (the nft binary), the first comparison after a full sync
//     rebuilds it. A comparison gives way to syncs (proxycore.DriftQuiet).
//     Differences make the next sync, triggered at once, a full one.
//     MonitorTable looks every TableCheckInterval whether the table exists and,
//     when it was deleted, records it and triggers a full sync.
//   - Sync must be called from one goroutine (the sync runner). SetServiceCIDRs,
//     Verify and RequestFullSync may be called from any goroutine.
//   - Config.AfterSync, when set, is called on that goroutine after every Sync that
//     succeeded (also when there was nothing to write), never after a failed one; the
//     localhost NodePort listeners (internal/localnodeports) follow the model with it.
package nftables
