package node

import (
	"context"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"
)

// NodeHostIPs returns the node's primary IP and, if it has one, its first IP of the
// other family: InternalIP addresses are considered before ExternalIP ones, in
// their listed order. Unparseable addresses are skipped. It returns nil when the
// node has no usable address.
func NodeHostIPs(node *v1.Node) []netip.Addr {
	if node == nil {
		return nil
	}
	var all []netip.Addr
	for _, addrType := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
		for _, a := range node.Status.Addresses {
			if a.Type != addrType {
				continue
			}
			if ip, ok := parseIPSloppy(a.Address); ok {
				all = append(all, ip)
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	ips := []netip.Addr{all[0]}
	for _, ip := range all[1:] {
		if ip.Is6() != all[0].Is6() {
			ips = append(ips, ip)
			break
		}
	}
	return ips
}

// parseIPSloppy parses an IP as Kubernetes does (IPv4 octets with leading zeros
// are accepted, for compatibility with existing objects).
func parseIPSloppy(s string) (netip.Addr, bool) {
	ip := netutils.ParseIPSloppy(s)
	if ip == nil {
		return netip.Addr{}, false
	}
	addr, ok := netip.AddrFromSlice(ip)
	return addr.Unmap(), ok
}

// FamilyOf returns the IP family of an address.
func FamilyOf(ip netip.Addr) v1.IPFamily {
	if ip.Unmap().Is4() {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

// DetectNodeIPs returns the primary IP family and the node IP of each family, by
// kube-proxy's precedence:
//  1. a bindAddress that is not 0.0.0.0 or :: is the primary IP;
//  2. otherwise the node's IPs (NodeHostIPs), the first being primary;
//  3. a family without either uses the loopback address (127.0.0.1 or ::1), and a
//     loopback primary IP is reported with a log line.
//
// Both families always have an entry: kube-proxy runs dual-stack whenever the
// kernel and backend support it, whatever the node's own addresses.
func DetectNodeIPs(ctx context.Context, rawNodeIPs []netip.Addr, bindAddress string) (v1.IPFamily, map[v1.IPFamily]netip.Addr) {
	primary := v1.IPv4Protocol
	nodeIPs := map[v1.IPFamily]netip.Addr{
		v1.IPv4Protocol: netip.AddrFrom4([4]byte{127, 0, 0, 1}),
		v1.IPv6Protocol: netip.IPv6Loopback(),
	}
	if len(rawNodeIPs) > 0 {
		primary = FamilyOf(rawNodeIPs[0])
		nodeIPs[primary] = rawNodeIPs[0].Unmap()
		if len(rawNodeIPs) > 1 {
			nodeIPs[FamilyOf(rawNodeIPs[1])] = rawNodeIPs[1].Unmap()
		}
	}
	if bindIP, ok := parseIPSloppy(bindAddress); ok && !bindIP.IsUnspecified() {
		primary = FamilyOf(bindIP)
		nodeIPs[primary] = bindIP
	}
	if nodeIPs[primary].IsLoopback() {
		klog.FromContext(ctx).Info("Can't determine this node's IP, assuming loopback; if this is incorrect, please set the --bind-address flag")
	}
	return primary, nodeIPs
}
