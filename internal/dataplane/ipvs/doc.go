// Package ipvs is the thin dataplane layer of kproxy's ipvs mode (deprecated
// upstream in 1.35, kept until 1.43): one Proxier per IP family turns the model's
// committed changes into the renderer's desired state (internal/render/ipvs) and
// makes the kernel match it through the boundaries of internal/ipvs (virtual and
// real servers, graceful termination), internal/ipvs/dummy (kube-ipvs0 and its
// addresses), internal/ipset and internal/iptables, then does the follow-up work
// shared with the other modes (internal/dataplane/followup).
//
// Contract:
//   - New has no side effects; nothing touches the kernel before the first Sync.
//   - Each Sync re-renders the ServicePorts that changed (all of them when the
//     node's addresses changed), assembles the desired state, and writes only
//     what differs from what it last applied: set entries with one `ipset
//     restore`, addresses, virtual and real servers one netlink request each, and
//     the mode's iptables chains only when their text changed. A sync that
//     changes nothing writes nothing. Upstream's ipvs proxier instead lists every
//     virtual server and real server from the kernel at every sync.
//   - The first Sync, the first after a failure or RequestFullSync, and one every
//     FullSyncPeriod are full: the kernel is listed (sets, kube-ipvs0's addresses,
//     virtual servers and their real servers), the jumps from the built-in chains
//     are ensured and every chain rewritten, and whatever differs is repaired. As
//     upstream, a full sync deletes every virtual server of the family that no
//     Service renders unless it lies in ExcludeCIDRs, and resets the weight of real
//     servers that are not terminating.
//   - A kernel call that fails does not stop the others (every other Service is
//     still programmed); the Sync then returns the joined errors, the sync runner
//     retries with back-off, and the retry is a full sync. A failed restore counts
//     in kubeproxy_sync_proxy_rules_iptables_restore_failures_total, as upstream.
//   - Removed real servers go through Graceful (weight 0 until their connections
//     are gone), and one that is terminating is neither re-weighted nor re-added
//     until its endpoint comes back (then it is deleted and added afresh).
//   - Drift detection (drift.go, internal/drift): Verify, from any goroutine,
//     and RunDriftChecks, once per DriftCheckPeriod, list the family's virtual
//     and real servers, the mode's sets, kube-ipvs0's addresses of the family
//     and iptables-save of nat and filter with no lock held, then compare them
//     under the sync lock with what the last sync applied; a sync that begins
//     meanwhile makes the comparison give way and be made again
//     (proxycore.DriftComparison). The listing and the diff are the full sync's
//     own (diff.go), so what a comparison reports is exactly what the full sync
//     it requests repairs: not real servers in graceful termination, virtual
//     servers in ExcludeCIDRs or of the other family, other software's sets,
//     chains and rules, or the other family's addresses; a virtual server of
//     the family that no Service renders is extra (the full sync deletes it,
//     as upstream). The chains compare as the iptables mode's do
//     (render/iptables.CompareTables).
//   - Sync must be called from one goroutine (the sync runner); RequestFullSync
//     and Verify from any.
package ipvs
