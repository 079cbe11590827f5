package ipvs

import (
	"fmt"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/model"
	ipt "github.com/kproxy/kproxy/internal/render/iptables"
)

// DefaultScheduler is upstream's scheduler when ipvs.scheduler is empty.
const DefaultScheduler = "rr"

// Config is everything besides Services that shapes the ipvs mode's kernel state
// for one IP family.
type Config struct {
	// Family is v1.IPv4Protocol or v1.IPv6Protocol.
	Family v1.IPFamily
	// Scheduler is ipvs.scheduler ("" means DefaultScheduler). Any name is
	// taken, as upstream, which does not validate it: the kernel decides
	// (rr, wrr, lc, wlc, lblc, lblcr, dh, sh, sed, nq, fo, ovf, mh, twos, ...),
	// and the proxier's start-up check programs a dummy virtual server with it.
	Scheduler string
	// MasqueradeAll masquerades all traffic to ClusterIPs (masqueradeAll).
	MasqueradeAll bool
	// MasqueradeBit is the bit of the packet mark that requests masquerading
	// (upstream default 14, mark 0x4000).
	MasqueradeBit int32
	// LocalDetector recognizes traffic from local pods; without one, upstream
	// masquerades node-originated traffic with a ClusterIP source instead.
	LocalDetector model.LocalDetector
	// NodePortAddresses are the addresses NodePorts are served on. With All, they
	// are HostAddresses.
	NodePortAddresses model.NodePortAddresses
	// NodeIP is this node's primary IP of this family (may be invalid). When a
	// Service's loadBalancerSourceRanges contain it, the node may reach the LB VIPs
	// (KUBE-LOAD-BALANCER-SOURCE-IP); otherwise KUBE-IPVS-OUT-FILTER blocks them.
	NodeIP netip.Addr
	// HostAddresses are the node's local addresses of this family on every
	// interface but kube-ipvs0, without loopback and IPv6 link-local addresses
	// (upstream's GetAllLocalAddressesExcept, read at every sync). They serve
	// NodePorts with NodePortAddresses.All, and externalIPs or LB VIPs among them
	// are not bound to kube-ipvs0 (they already are local).
	HostAddresses []netip.Addr
}

// Validate reports configuration errors that would make the rendered state invalid.
func (c *Config) Validate() error {
	if err := ipt.ValidateCommon(c.Family, c.MasqueradeBit, &c.LocalDetector, &c.NodePortAddresses); err != nil {
		return err
	}
	for _, ip := range c.HostAddresses {
		if !c.hasFamily(ip) {
			return fmt.Errorf("host address %s is not of family %s", ip, c.Family)
		}
	}
	if c.NodeIP.IsValid() && !c.hasFamily(c.NodeIP) {
		return fmt.Errorf("node IP %s is not of family %s", c.NodeIP, c.Family)
	}
	return nil
}

func (c *Config) isIPv6() bool { return c.Family == v1.IPv6Protocol }

func (c *Config) hasFamily(a netip.Addr) bool { return model.InFamily(a, c.Family) }

func (c *Config) scheduler() string {
	if c.Scheduler == "" {
		return DefaultScheduler
	}
	return c.Scheduler
}

// isHostAddress reports whether ip is already local on another interface than
// kube-ipvs0 (upstream does not bind it then). The list is short: a scan.
func (c *Config) isHostAddress(ip netip.Addr) bool { return slices.Contains(c.HostAddresses, ip) }

// nodePortIPs are the addresses that get one NodePort virtual server each:
// HostAddresses with NodePortAddresses.All, else the resolved NodePort addresses;
// loopback never (upstream skips it; IPVS cannot serve it), IPv6 link-local only
// when listed explicitly (upstream's GetAllLocalAddressesExcept leaves them out of
// "all", GetNodeIPs keeps them). Sorted, without duplicates.
func (c *Config) nodePortIPs() []netip.Addr {
	src := c.NodePortAddresses.IPs
	if c.NodePortAddresses.All {
		src = c.HostAddresses
	}
	out := make([]netip.Addr, 0, len(src))
	for _, ip := range src {
		if !c.hasFamily(ip) || ip.IsLoopback() || c.NodePortAddresses.All && ip.IsLinkLocalUnicast() {
			continue
		}
		out = append(out, ip)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}
