// Package reliability measures kproxy and the pinned upstream kube-proxy (v1.37.2) under
// faults and odd input, the same way, in the lab (issue 16): continuous probes run while
// a scenario disrupts the proxy, and each run is summarised as failed probes, the
// longest outage, the time to recover, the proxy's RSS before and after, and whether
// anything was lost.
//
// Contract:
//   - One lab per package (TestMain, labtest.Suite). Each run of a scenario starts one
//     proxy (kproxy, or upstream's binary) in node1 in one mode (nftables or iptables)
//     from an empty dataplane, and leaves node1's dataplane empty after it
//     (lab.ResetNode1Dataplane): proxies and modes never see each other's rules.
//   - Probes (Runner) start only once the proxy has synced and every probe target
//     answers, so a failure is always the scenario's doing. Streams: ClusterIP from a pod
//     on node1, ClusterIP from node1 itself, NodePort from the external client, each
//     over TCP and UDP, every ProbeInterval (20 probes/s per stream). A probe fails
//     when no answer arrived within ProbeTimeout; an outage is the span from a stream's
//     first failed probe to its next answered one. A probe that timed out well after its
//     timeout (Sample.Stalled) ran in a starved test process: it is counted apart, as
//     stalled, and neither fails nor answers.
//   - "Lost anything" is checked after the scenario, once the proxy has synced: every
//     probe target and a sample of the loaded Services answer, and the kernel holds at
//     least as many Service rules as before the scenario (bench.CountServices).
//   - Scenarios: 1, restarts in a row (RunRestarts); 2, the API server restarted and
//     then down (RunAPIServerOutage); 3, a transaction the kernel refuses, because a
//     chain that is not the proxy's jumps to the chain of a Service being deleted
//     (RunRefusedTransaction; another Service changes every 2 s meanwhile, as
//     upstream acts on a deleted Service's chain only in a later sync; the other
//     kernel faults, a netlink socket error and the xtables lock held, are kproxy's
//     own tests in make test: upstream has no seam for the first, and the lock
//     needs the legacy backend); 4, a churn soak (RunChurnSoak); 5, odd but valid
//     API data (RunOddData).
//   - The churn soak makes 50 Service or EndpointSlice changes a second for its length,
//     under the same probes: one goroutine measures change-to-programmed latency one
//     change after another with the bench's own change (bench.Loader.ChangeEndpoint:
//     a churn Service's endpoint replaced, then probed through its ClusterIP until the
//     new pod answers); writers make the other changes. RSS (VmRSS) is read every
//     second and go_goroutines (the metrics port, both proxies) every 10 s. Reported
//     per window: changes, p50/p99/max latency, peak RSS, goroutines; verdicts per
//     proxy: the peak RSS of the last minute within 10% of the first minute's,
//     goroutines flat, p99 stable over the windows
//     (Soak.Verdicts; kproxy is held to them). iptables mode soaks at most 1,000
//     Services (iptables-nft cannot restore 10,000 in minutes) and runs first, and the
//     soak's file sorts last: the World's Services only grow.
//   - Short versions (3 restarts of each kind with 100 Services; 2 API server restarts;
//     the odd data as is; a 2-minute soak of the 100 Services in windows of 30 s) run
//     under `go test`; KPROXY_RELIABILITY=full runs the full versions (`make
//     reliability`: 20 restarts per signal with 1,000 Services; 3 API server restarts,
//     then down a minute; a 30-minute soak of 10,000 Services in windows of 5 minutes),
//     and KPROXY_RELIABILITY_OUT=<dir> writes the results table there as
//     <timestamp>-reliability.md and .json (bench/results' style). The table's header
//     names the version ("short", "full") and what the environment changed
//     (KPROXY_RELIABILITY_RESTARTS, KPROXY_RELIABILITY_SOAK_SERVICES, _DURATION, _WINDOW);
//     each scenario's sizes are in its rows.
//   - Without root, the lab's binaries or upstream's binary the tests skip with the
//     reason; with KPROXY_E2E_REQUIRED=1 they fail instead. Every wait is bounded and
//     says what it awaited; the lab is torn down on exit, also on failure.
package reliability
