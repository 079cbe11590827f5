// Package conntrack owns kproxy's use of the kernel connection-tracking table.
//
//   - Interface lists and deletes conntrack entries over netlink
//     (github.com/vishvananda/netlink), never by running conntrack(8); NewFake is an
//     in-memory table for tests.
//   - CleanStaleEntries is the stale-flow reconciler with kube-proxy's semantics: it
//     deletes UDP flows sent to a Service frontend (cluster IP, external IP, load
//     balancer VIP or NodePort) whose DNAT target is not a serving endpoint of that
//     Service. Its input is the small, pure Service description defined here; the
//     decision itself (StaleFlows) is a pure function.
//   - ApplySysctls sizes and tunes the table (nf_conntrack_max, hashsize, TCP/UDP
//     timeouts, tcp_be_liberal) from the kube-proxy configuration, through the
//     internal/sysctl boundary. As upstream, the first failure is returned and the
//     daemon fails its start with it.
package conntrack
