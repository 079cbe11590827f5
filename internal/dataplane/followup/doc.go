// Package followup is the work every dataplane proxier does around writing its rules,
// shared by the nftables and iptables modes so that they behave alike: it reports
// the API data the model skipped (log and Warning event), and once a sync's rules are
// in the kernel it clears stale UDP conntrack flows, updates the service health
// check servers, the no-local-endpoints gauges, the sync metrics and /healthz.
//
// Contract:
//   - New has no side effects. A Work belongs to one proxier and is called from its
//     Sync goroutine only.
//   - The proxier calls Failed with the model update of a sync whose rules did not
//     reach the kernel, and Succeeded with that of a sync whose rules did: work of
//     failed syncs (conntrack cleanup, health check node port changes) is kept and
//     done by the next successful one, never lost.
//   - Succeeded also sums up the network programming latencies it observes until
//     TakeProgramming takes them (proxycore's time series, for the status page).
//   - Nothing here decides which rules to write or touches the ruleset.
package followup
