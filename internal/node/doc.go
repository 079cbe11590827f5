// Package node knows about the node kproxy runs on, as kube-proxy's node manager
// and server setup do:
//
//   - GetHostname: the node name (hostname override or os.Hostname, trimmed and
//     lowercased).
//   - Manager: watches this node's Node object (field selector
//     metadata.name=<node>, managedFields stripped). Start waits, bounded, for the
//     object to exist and have addresses (and podCIDRs when they are watched for
//     NodeCIDR local-traffic detection). Run then returns ErrNodeIPsChanged,
//     ErrPodCIDRsChanged or ErrNodeDeleted when the node changes in a way that needs
//     a restart; kube-proxy exits the process there, kproxy returns the error so the
//     daemon exits and is restarted.
//   - NodeHostIPs and DetectNodeIPs: the node IPs and the primary IP family, by
//     kube-proxy's precedence (non-zero bind address, then Node InternalIP then
//     ExternalIP addresses, then loopback with a warning).
//   - SupportedFamilies: which IP families the kernel supports (IPv6 absent or
//     disabled makes the proxy single-stack), behind the KernelProbe interface.
package node
