// Package cluster is the short version of `make e2e-upstream` that `make test` runs: one
// real cluster (test/cluster: control plane, 3 kubelet/containerd workers, CoreDNS),
// kproxy as kubeadm's DaemonSet from its image, and upstream's focused set of
// sig-network specs (cluster.SpecsShort) in nftables and in iptables mode; then the
// takeover of upstream kube-proxy's DaemonSet by kproxy's image and back, under
// continuous probes, in each mode.
//
// It needs root, the cluster's binaries and images (hack/setup.sh, hack/cluster-images.sh);
// without them it skips, or fails under KPROXY_E2E_REQUIRED=1; in -short mode it always
// skips. After the package's tests
// the cluster is torn down and checked for leftovers (namespaces, cgroups, processes,
// mounts).
package cluster
