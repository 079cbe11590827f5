// Package nftables is the end-to-end suite proving upstream kube-proxy's Service
// behaviours with real packets in the lab: ClusterIP, NodePort, LoadBalancer and
// external IPs, session affinity, traffic policies and health check node ports,
// topology hints and terminating fallback, no-endpoint rejects, masquerading and the
// local-traffic detectors, stale UDP conntrack entries and the proxy's lifecycle
// (other software's tables and chains kept, restarts keeping connections, --cleanup,
// --init-only, switching the mode on restart), kernel faults (a transaction the kernel
// refuses; in iptables mode, the xtables lock held for 10 s, with the proxy on the
// legacy backend and a private lock file named by XTABLES_LOCKFILE, never the host's),
// and what an operator reads of it:
// `kube-proxy explain` and the status page, loaded in a real headless Chromium
// (Debian's chromium package; skipped without it unless KPROXY_E2E_REQUIRED=1).
//
// The suite runs against either mode with one parameter: $KPROXY_E2E_MODE is
// nftables (the default), iptables, or default (the configuration file leaves the
// mode blank, as kubeadm's ConfigMap does, which is iptables mode). Where upstream's two modes behave differently,
// the test checks each mode's own behaviour and says so: the default
// nodePortAddresses, localhost NodePorts (iptables mode; nftables mode only with
// its alpha feature gate) and the canary (iptables mode only), the
// ServiceCIDR and unknown-port checks (nftables mode only, skipped with the reason in
// iptables mode).
//
// Contract: one lab and one proxy per package (TestMain and sharedProxy); each test
// creates uniquely named Services and deletes them (with their EndpointSlices) on
// cleanup; every wait is bounded and says what it awaited. Tests that need a
// differently configured proxy replace the shared one and restore it. The kernel is
// read and written in the lab's node1 namespace only. The browser runs in the test
// process's namespace and reaches node1's metrics address through a loopback
// forwarder of the test process; every Chromium process is killed at the end of
// its test.
package nftables
