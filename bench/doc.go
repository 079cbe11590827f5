// Package bench is the performance harness behind `make bench`: it runs kproxy and
// upstream kube-proxy (v1.37.2) one after the other in the same lab node namespace,
// against the same API server and the same objects, in each proxy mode (nftables and
// iptables, both proxies in the same mode), and compares them by ratio within one run.
//
// Contract:
//   - Objects are loaded once per size (incrementally: 1, then 1,000, then 10,000
//     Services ...) and reused by both proxies and every mode; loading is never
//     measured.
//   - Each proxy run starts from an empty dataplane: after a proxy stops, the harness
//     deletes the "kube-proxy" nftables tables, restores the iptables nat, filter and
//     mangle tables empty, removes the ipvs objects (virtual servers, ipsets,
//     kube-ipvs0) and flushes conntrack in node1 (the only namespace the proxies touch;
//     lab.ResetNode1Dataplane).
//   - Every measurement is taken from outside the proxy: probes from a client pod, the
//     count of Services the kernel holds (the service-ips map, the "cluster IP"
//     rules of the nat KUBE-SERVICES chain, or the IPv4 IPVS virtual servers), and
//     /proc of the proxy process.
//   - Everything is bounded (per-proxy cap, probe timeouts); the lab is torn down on
//     exit and on SIGINT/SIGTERM by the caller.
//   - ipvs mode, which this host's kernel lacks, is measured in the test VM (VMPlan;
//     test/vm, Debian 12's 6.1 kernel under TCG): VMHost boots it with a tap in the
//     host lab's node1, and the same binary there (RunInVM) builds a lab with the
//     host's pod layout on the host's API server, takes the objects the host loaded
//     (Loader.Adopt), and runs the same Runner, one mode at one size; the host reads
//     the churn Services back afterwards. Its rows are ratios only: emulation decides
//     the absolute figures.
//
// The package is not run by `go test`: it has no tests that start a lab; the command
// is bench/cmd/kproxy-bench.
package bench
