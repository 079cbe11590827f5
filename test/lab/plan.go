package lab

import (
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
)

// Dual holds one value per IP family.
type Dual[T any] struct {
	V4, V6 T
}

// Get returns the value for family.
func (d Dual[T]) Get(family v1.IPFamily) T {
	if family == v1.IPv6Protocol {
		return d.V6
	}
	return d.V4
}

// Slice returns the values in the order IPv4, IPv6.
func (d Dual[T]) Slice() []T { return []T{d.V4, d.V6} }

// Families lists the lab's IP families in order.
var Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}

// Fixed address plan. Node, external and load-balancer addresses are documentation
// ranges, so they can never collide with anything real.
var (
	ServiceCIDRs      = Dual[netip.Prefix]{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:10:96::/112")}
	ClusterCIDRs      = Dual[netip.Prefix]{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/48")}
	NodeNetwork       = Dual[netip.Prefix]{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8:1::/64")}
	ExternalNetwork   = Dual[netip.Prefix]{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8:2::/64")}
	LoadBalancerCIDRs = Dual[netip.Prefix]{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8:3::/64")}
	// PodGatewayV6 is the link-local address node namespaces put on every pod veth; pods
	// route IPv6 through it. (IPv4 pods use the first address of the node's pod CIDR.)
	PodGatewayV6 = netip.MustParseAddr("fe80::1")
)

// Region is the topology.kubernetes.io/region label of every lab node.
const Region = "lab-region"

// MaxPodsPerNode bounds the pods of one node: pod k uses host number k+1 of the /24.
const MaxPodsPerNode = 250

// PodPlan is the addressing of one pod.
type PodPlan struct {
	Name string // also the identity its backends answer with
	Node string
	IPs  Dual[netip.Addr]
	// HostIf is the name of the pod's veth inside its node namespace.
	HostIf string
}

// NodePlan is the addressing of one node.
type NodePlan struct {
	Name     string
	Zone     string
	IPs      Dual[netip.Addr]   // on the node network; the Node's InternalIPs
	PodCIDRs Dual[netip.Prefix] // /24 and /64
	// PodGatewayV4 is assigned to every pod veth on the node side.
	PodGatewayV4 netip.Addr
	Pods         []PodPlan
}

// Plan is the complete address plan of a lab.
type Plan struct {
	Nodes []NodePlan // Nodes[0] is node1 (control plane, proxied), Nodes[1] is node2
	// Node1ExtIPs are node1's addresses on the external link, ExtIPs the client's.
	Node1ExtIPs Dual[netip.Addr]
	ExtIPs      Dual[netip.Addr]
}

// NewPlan computes the address plan for two nodes with the given numbers of pods.
func NewPlan(node1Pods, node2Pods int) (Plan, error) {
	var p Plan
	for i, n := range []int{node1Pods, node2Pods} {
		if n < 0 || n > MaxPodsPerNode {
			return Plan{}, fmt.Errorf("node%d: %d pods, want 0..%d", i+1, n, MaxPodsPerNode)
		}
		idx := i + 1
		node := NodePlan{
			Name: fmt.Sprintf("node%d", idx),
			Zone: fmt.Sprintf("zone-%c", 'a'+i),
			IPs: Dual[netip.Addr]{
				nthAddr(NodeNetwork.V4, idx),
				nthAddr(NodeNetwork.V6, idx),
			},
			PodCIDRs: Dual[netip.Prefix]{
				netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(idx), 0}), 24),
				netip.MustParsePrefix(fmt.Sprintf("fd00:10:244:%x::/64", idx)),
			},
		}
		node.PodGatewayV4 = nthAddr(node.PodCIDRs.V4, 1)
		for k := 1; k <= n; k++ {
			node.Pods = append(node.Pods, PodPlan{
				Name: fmt.Sprintf("%s-pod%d", node.Name, k),
				Node: node.Name,
				IPs: Dual[netip.Addr]{
					nthAddr(node.PodCIDRs.V4, k+1),
					nthAddr(node.PodCIDRs.V6, k+1),
				},
				HostIf: fmt.Sprintf("vpod%d", k),
			})
		}
		p.Nodes = append(p.Nodes, node)
	}
	p.Node1ExtIPs = Dual[netip.Addr]{nthAddr(ExternalNetwork.V4, 1), nthAddr(ExternalNetwork.V6, 1)}
	p.ExtIPs = Dual[netip.Addr]{nthAddr(ExternalNetwork.V4, 2), nthAddr(ExternalNetwork.V6, 2)}
	return p, nil
}

// nthAddr returns the n-th address after the prefix's network address (n < 256).
func nthAddr(p netip.Prefix, n int) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	b[len(b)-1] += byte(n)
	a, _ := netip.AddrFromSlice(b)
	return a
}

// LoadBalancerIP returns the n-th address (1..255) of the load-balancer range of family.
func LoadBalancerIP(family v1.IPFamily, n int) netip.Addr {
	return nthAddr(LoadBalancerCIDRs.Get(family), n)
}
