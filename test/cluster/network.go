package cluster

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/kproxy/kproxy/test/lab"
)

// Sysctls of every member's own network namespace (never the host's): forwarding, and
// no duplicate address detection on the node network, so IPv6 addresses work at once.
var memberSysctls = []string{
	"net.ipv4.ip_forward=1",
	"net.ipv6.conf.all.forwarding=1",
	"net.ipv6.conf.default.forwarding=1",
	"net.ipv6.conf.default.accept_dad=0",
	"net.ipv6.conf.all.accept_dad=0",
}

// buildNetwork makes the switch namespace with its bridge and every member with a veth
// on the bridge and its addresses. Veth pairs are created inside the cluster's
// namespaces, so nothing ever appears in the root namespace.
func (c *Cluster) buildNetwork(ctx context.Context) error {
	sw, err := c.newNamespace(ctx, "sw")
	if err != nil {
		return err
	}
	c.Switch = sw
	if err := sw.IPBatch(ctx, []string{"link add br0 type bridge", "link set br0 up"}); err != nil {
		return err
	}
	if _, err := sw.Run(ctx, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"); err != nil {
		return err
	}
	cp4, cp6 := memberAddrs(controlPlaneHost)
	c.CP = Member{Name: "cp", V4: cp4, V6: cp6}
	for i := 1; i <= c.opts.Workers; i++ {
		v4, v6 := memberAddrs(controlPlaneHost + i)
		c.Workers = append(c.Workers, &Worker{Member: Member{Name: fmt.Sprintf("node-%d", i), V4: v4, V6: v6},
			Zone: fmt.Sprintf("zone-%d", i)})
	}
	cl4, cl6 := memberAddrs(clientHost)
	c.Client = Member{Name: "client", V4: cl4, V6: cl6}
	for _, m := range c.members() {
		if m.NS, err = c.newNamespace(ctx, m.Name); err != nil {
			return err
		}
		if _, err := m.NS.Run(ctx, "sysctl", append([]string{"-q", "-w"}, memberSysctls...)...); err != nil {
			return err
		}
		port := "p-" + m.Name
		if err := sw.IPBatch(ctx, []string{
			"link add " + port + " type veth peer name eth0 netns " + m.NS.Name,
			"link set " + port + " master br0 up",
		}); err != nil {
			return err
		}
		if err := m.NS.IPBatch(ctx, []string{
			"link set lo up",
			"link set eth0 up",
			"addr add " + prefixed(m.V4, NodeSubnetV4.Bits()) + " dev eth0",
			"addr add " + prefixed(m.V6, NodeSubnetV6.Bits()) + " dev eth0 nodad",
		}); err != nil {
			return err
		}
	}
	// The control plane and the workers have a default route, as nodes do, via the
	// client (the cluster's "outside", which routes nowhere further): a process on a
	// node reaches a ClusterIP only if the kernel finds a route for it before the
	// proxy's DNAT (hostNetwork pods, the kubelet, the node's own clients), and
	// addresses outside the cluster (external IPs) go out that way.
	for _, m := range c.members() {
		if m == &c.Client {
			continue
		}
		if err := m.NS.IPBatch(ctx, []string{
			"route add default via " + c.Client.V4.String(),
			"route add default via " + c.Client.V6.String(),
		}); err != nil {
			return fmt.Errorf("default routes in %s: %w", m.Name, err)
		}
	}
	// No wait: the addresses skip duplicate address detection and the bridge (no STP)
	// forwards as soon as its ports are up.
	return nil
}

func (c *Cluster) newNamespace(ctx context.Context, role string) (*lab.NS, error) {
	name := c.ID + "-" + role
	if _, err := runHost(ctx, "ip", "netns", "add", name); err != nil {
		return nil, err
	}
	return c.addNamespace(name)
}

func prefixed(a netip.Addr, bits int) string { return netip.PrefixFrom(a, bits).String() }

// installPodRoutes routes every worker's podCIDRs via that worker on every other member.
func (c *Cluster) installPodRoutes(ctx context.Context) error {
	for _, m := range c.members() {
		var lines []string
		for _, w := range c.Workers {
			if &w.Member == m {
				continue
			}
			for _, p := range w.PodCIDRs {
				via := w.V4
				if p.Addr().Is6() {
					via = w.V6
				}
				lines = append(lines, fmt.Sprintf("route replace %s via %s", p, via))
			}
		}
		if err := m.NS.IPBatch(ctx, lines); err != nil {
			return fmt.Errorf("routes in %s: %w", m.Name, err)
		}
	}
	return nil
}
