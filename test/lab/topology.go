package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Sysctls written inside every lab namespace (never in the root namespace): no ICMP
// rate limit, neither per destination nor the namespace-wide budget shared by IPv4
// and IPv6 (1000/s with a burst of 50 by default: a burst of REJECTs must not look
// like timeouts), no IPv6 DAD (addresses
// usable at once; set before links exist so new interfaces inherit it), no reverse-path
// filter (inherited host settings must not drop routed test traffic).
var commonSysctls = []string{
	"net.ipv4.icmp_ratelimit=0",
	"net.ipv6.icmp.ratelimit=0",
	"net.ipv4.icmp_msgs_per_sec=1000000",
	"net.ipv4.icmp_msgs_burst=100000",
	"net.ipv6.conf.all.accept_dad=0",
	"net.ipv6.conf.default.accept_dad=0",
	"net.ipv4.conf.all.rp_filter=0",
	"net.ipv4.conf.default.rp_filter=0",
}

// nodeSysctls are added in node namespaces, which route for their pods.
var nodeSysctls = []string{
	"net.ipv4.ip_forward=1",
	"net.ipv6.conf.all.forwarding=1",
	"net.ipv6.conf.default.forwarding=1",
}

func (l *Lab) newNamespace(ctx context.Context, role string, node bool) (*NS, error) {
	ns := newNS(l.ID + role)
	if _, err := runCmd(ctx, nil, "ip", "netns", "add", ns.Name); err != nil {
		return nil, err
	}
	if !l.addNamespace(ns) {
		return nil, errors.Join(errors.New("lab closed during start"), deleteNamespace(ctx, ns.Name))
	}
	sysctls := commonSysctls
	if node {
		sysctls = append(append([]string(nil), commonSysctls...), nodeSysctls...)
	}
	if _, err := ns.Run(ctx, "sysctl", append([]string{"-q", "-w"}, sysctls...)...); err != nil {
		return nil, err
	}
	return ns, nil
}

// buildTopology creates the namespaces and wires them as described in the package doc.
func (l *Lab) buildTopology(ctx context.Context) error {
	plan := l.Plan
	var err error
	nodes := make([]*Node, len(plan.Nodes))
	for i, np := range plan.Nodes {
		n := &Node{NodePlan: np}
		if n.NS, err = l.newNamespace(ctx, np.Name, true); err != nil {
			return err
		}
		for _, pp := range np.Pods {
			pod := &Pod{PodPlan: pp, Node: n}
			if pod.NS, err = l.newNamespace(ctx, pp.Name, false); err != nil {
				return err
			}
			n.Pods = append(n.Pods, pod)
			l.Pods = append(l.Pods, pod)
		}
		nodes[i] = n
	}
	l.Node1, l.Node2 = nodes[0], nodes[1]
	if l.Ext, err = l.newNamespace(ctx, "ext", false); err != nil {
		return err
	}
	n1, n2 := l.Node1, l.Node2

	// Links are created inside node namespaces with the peer placed directly in the
	// other namespace, so nothing ever appears in the root namespace. Node-side links
	// get explicit interface indexes unlike their peers' (always 2, the first after lo):
	// when both ends of a veth share an index, the kernel treats its carrier change as
	// not urgent and delays it by up to a second.
	n1Links := []string{
		"link set lo up",
		"link add eth0 index 10 type veth peer name eth0 netns " + n2.NS.Name,
		"link add ext0 index 11 type veth peer name eth0 netns " + l.Ext.Name,
		"addr add " + prefixed(n1.IPs.V4, 24) + " dev eth0",
		"addr add " + prefixed(n1.IPs.V6, 64) + " dev eth0 nodad",
		"addr add " + prefixed(plan.Node1ExtIPs.V4, 24) + " dev ext0",
		"addr add " + prefixed(plan.Node1ExtIPs.V6, 64) + " dev ext0 nodad",
		"link set eth0 up",
		"link set ext0 up",
	}
	n2Links := []string{
		"link set lo up",
		"addr add " + prefixed(n2.IPs.V4, 24) + " dev eth0",
		"addr add " + prefixed(n2.IPs.V6, 64) + " dev eth0 nodad",
		"link set eth0 up",
	}
	if err := n1.NS.IPBatch(ctx, append(n1Links, podLinks(n1)...)); err != nil {
		return err
	}
	if err := n2.NS.IPBatch(ctx, append(n2Links, podLinks(n2)...)); err != nil {
		return err
	}
	for _, n := range nodes {
		for _, pod := range n.Pods {
			if err := pod.NS.IPBatch(ctx, podSide(n, pod)); err != nil {
				return err
			}
		}
	}
	if err := l.Ext.IPBatch(ctx, []string{
		"link set lo up",
		"addr add " + prefixed(plan.ExtIPs.V4, 24) + " dev eth0",
		"addr add " + prefixed(plan.ExtIPs.V6, 64) + " dev eth0 nodad",
		"link set eth0 up",
		"route add 0.0.0.0/0 via " + plan.Node1ExtIPs.V4.String(),
		"route add ::/0 via " + plan.Node1ExtIPs.V6.String(),
	}); err != nil {
		return err
	}
	// Routes last: every gateway and device is up by now.
	n1Routes := append(podRoutes(n1),
		"route add "+n2.PodCIDRs.V4.String()+" via "+n2.IPs.V4.String(),
		"route add "+n2.PodCIDRs.V6.String()+" via "+n2.IPs.V6.String(),
	)
	n2Routes := append(podRoutes(n2),
		"route add 0.0.0.0/0 via "+n1.IPs.V4.String(),
		"route add ::/0 via "+n1.IPs.V6.String(),
	)
	if err := n1.NS.IPBatch(ctx, n1Routes); err != nil {
		return err
	}
	if err := n2.NS.IPBatch(ctx, n2Routes); err != nil {
		return err
	}
	return l.waitLinksReady(ctx)
}

// prefixed renders addr with the given prefix length ("192.0.2.1/24").
func prefixed(addr netip.Addr, bits int) string {
	return fmt.Sprintf("%s/%d", addr, bits)
}

// podLinks creates the node side of each pod's veth: the pod gateway addresses (the
// same on every pod veth, as a point-to-point CNI does) and the link.
func podLinks(n *Node) []string {
	var out []string
	for i, pod := range n.Pods {
		out = append(out,
			fmt.Sprintf("link add %s index %d type veth peer name eth0 netns %s", pod.HostIf, 100+i, pod.NS.Name),
			fmt.Sprintf("addr add %s/32 dev %s", n.PodGatewayV4, pod.HostIf),
			fmt.Sprintf("addr add %s/64 dev %s nodad", PodGatewayV6, pod.HostIf),
			fmt.Sprintf("link set %s up", pod.HostIf),
		)
	}
	return out
}

// podRoutes routes each pod's /32 and /128 to its veth on the node.
func podRoutes(n *Node) []string {
	var out []string
	for _, pod := range n.Pods {
		out = append(out,
			fmt.Sprintf("route add %s/32 dev %s", pod.IPs.V4, pod.HostIf),
			fmt.Sprintf("route add %s/128 dev %s", pod.IPs.V6, pod.HostIf),
		)
	}
	return out
}

// podSide configures the pod: host addresses (/32, /128) so that all traffic, even to
// other pods of the node, goes through the node, where the proxy sees it.
func podSide(n *Node, pod *Pod) []string {
	gw := n.PodGatewayV4.String()
	return []string{
		"link set lo up",
		fmt.Sprintf("addr add %s/32 dev eth0", pod.IPs.V4),
		fmt.Sprintf("addr add %s/128 dev eth0 nodad", pod.IPs.V6),
		"link set eth0 up",
		"route add " + gw + "/32 dev eth0 scope link",
		"route add 0.0.0.0/0 via " + gw + " dev eth0",
		"route add ::/0 via " + PodGatewayV6.String() + " dev eth0",
	}
}

// waitLinksReady waits, bounded, until every link has carrier and no IPv6 address is
// tentative (DAD is disabled, so this normally passes at once).
func (l *Lab) waitLinksReady(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for _, ns := range l.Namespaces() {
		for {
			links, err := ns.IP(ctx, "-o", "link", "show")
			if err != nil {
				return err
			}
			tentative, err := ns.IP(ctx, "-6", "addr", "show", "tentative")
			if err != nil {
				return err
			}
			if !strings.Contains(links, "NO-CARRIER") && strings.TrimSpace(tentative) == "" {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("netns %s: links not ready:\n%s\n%s", ns.Name, links, tentative)
			}
			time.Sleep(20 * time.Millisecond) // carrier and DAD change in the kernel; poll
		}
	}
	return nil
}
