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
//     then down (RunAPIServerOutage); 5, odd but valid API data (RunOddData).
//   - Short versions (3 restarts of each kind with 100 Services; 2 API server restarts;
//     the odd data as is) run under `go test`; KPROXY_RELIABILITY=full runs the full versions (`make
//     reliability`), and KPROXY_RELIABILITY_OUT=<dir> writes the results table there as
//     <timestamp>-reliability.md and .json (bench/results' style).
//   - Without root, the lab's binaries or upstream's binary the tests skip with the
//     reason; with KPROXY_E2E_REQUIRED=1 they fail instead. Every wait is bounded and
//     says what it awaited; the lab is torn down on exit, also on failure.
package reliability
