package app

import (
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/config"
)

// expandNodePortAddresses replaces the keywords of nodePortAddresses by CIDRs, as
// upstream does once the node IPs are known: "primary" pins NodePorts to the node's
// IP of each family (a loopback node IP has nothing routable to pin to, so it is
// skipped), "localhost" to the loopback ranges, "all" to both zero CIDRs.
func expandNodePortAddresses(addrs []string, nodeIPs map[v1.IPFamily]netip.Addr) []string {
	var out []string
	for _, a := range addrs {
		switch a {
		case config.NodePortAddressesPrimary:
			for _, family := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
				if ip := nodeIPs[family]; ip.IsValid() && !ip.IsLoopback() {
					out = append(out, netip.PrefixFrom(ip, ip.BitLen()).String())
				}
			}
		case config.NodePortAddressesLocalhost:
			out = append(out, "127.0.0.0/8", "::1/128")
		case config.NodePortAddressesAll:
			out = append(out, "0.0.0.0/0", "::/0")
		default:
			out = append(out, a)
		}
	}
	return out
}

// nodePortAddresses is the expanded nodePortAddresses of one family.
type nodePortAddresses struct {
	// all: NodePorts are served on every local address (no CIDR of this family was
	// given, or a zero CIDR was).
	all   bool
	cidrs []netip.Prefix
}

// newNodePortAddresses keeps the CIDRs of family; like upstream, a family without
// any CIDR serves NodePorts on all its addresses.
func newNodePortAddresses(family v1.IPFamily, expanded []string) nodePortAddresses {
	var n nodePortAddresses
	for _, s := range expanded {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Addr().Is6() != (family == v1.IPv6Protocol) {
			continue
		}
		if p.Bits() == 0 {
			return nodePortAddresses{all: true}
		}
		n.cidrs = append(n.cidrs, p.Masked())
	}
	if len(n.cidrs) == 0 {
		n.all = true
	}
	return n
}

// match returns the addresses among local that lie in the CIDRs, sorted and unique.
func (n nodePortAddresses) match(local []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, ip := range local {
		ip = ip.Unmap()
		for _, c := range n.cidrs {
			if c.Contains(ip) {
				out = append(out, ip)
				break
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}
