// Package cluster runs a real, throw-away Kubernetes cluster on one machine, in network
// namespaces, for `make cluster`, `make e2e-upstream` and the takeover test: a control
// plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler), worker nodes
// (kubelet with containerd and runc), CoreDNS, and kube-proxy as kubeadm's DaemonSet
// from a container image (kproxy's or upstream's), dual stack.
//
// Topology (addresses from documentation ranges; one L2 segment):
//
//	        bridge in <id>sw
//	┌─────────┬─────────┬─────────┬─────────┐
//	cp        node-1    node-2    node-3    client
//	.10       .11       .12       .13       .100      192.0.2.0/24, 2001:db8:1::/64
//
// cp runs the control plane (no kubelet: it is not a Node); each worker runs containerd
// and a kubelet; client is outside the cluster (kubectl, the e2e binary and the external
// probes run there). Pods get addresses from their node's podCIDR (10.244.0.0/16 and
// fd00:10:244::/56, allocated by the controller manager) through the CNI ptp plugin,
// so every pod packet is routed through its node's namespace; every member routes each
// node's podCIDRs via that node. Services: 10.96.0.0/16 and fd00:10:96::/112; cluster
// DNS at 10.96.0.10.
//
// Contract:
//   - New has no side effects; Start builds everything and, when it fails midway, tears
//     down what it built; Close is idempotent and leaves nothing behind.
//   - Nothing is configured in the root network namespace, and no host-wide sysctl is
//     written. Each worker's daemons share one private mount namespace (held by a
//     process of the cluster): a tmpfs over /run and /var/lib (containerd 1.6 and libcni
//     hard-wire paths there, and pod network namespaces are bind mounts in /run/netns),
//     and files holding the values the kubelet insists on bind-mounted over the six
//     /proc/sys entries it checks (it runs with protectKernelDefaults, so it reads them
//     and never writes). Every mount a node's daemons and containers make stays in that
//     namespace and goes with it.
//   - Each worker's daemons and containers live under one cgroup per hierarchy
//     (/<id>/<node>, the kubelet's cgroupRoot), so teardown kills every process of the
//     node by cgroup, waits for the kernel to release them, and removes the cgroups.
//   - Namespace and cgroup names start with <prefix><pid>-<random> (prefix "kpc-"); Start
//     removes leftovers of dead owners first.
//   - Images cannot be pulled here: every image is a docker-archive built by
//     hack/cluster-images.sh, imported into each node's containerd under the names the
//     tests use; every pod uses imagePullPolicy IfNotPresent or Never in effect.
package cluster
