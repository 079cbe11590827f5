package nftables

import (
	"fmt"
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
)

// TableName is the nftables table kproxy owns in each family. It is the same name as
// upstream kube-proxy's, so kproxy's first full sync atomically replaces upstream's
// ruleset (drop-in replacement).
const TableName = "kube-proxy"

// Config is everything besides Services that shapes the ruleset of one family.
type Config struct {
	// Family is knftables.IPv4Family or knftables.IPv6Family.
	Family            knftables.Family
	NodePortAddresses model.NodePortAddresses
	LocalDetector     model.LocalDetector
	// MasqueradeBit is the bit of the packet mark that requests masquerading
	// (upstream default 14, mark 0x4000).
	MasqueradeBit int32
	// MasqueradeAll masquerades all traffic to ClusterIPs.
	MasqueradeAll bool
	// ServiceCIDRs are this family's ServiceCIDRs; traffic to an unallocated IP inside
	// them is dropped.
	ServiceCIDRs []netip.Prefix
	// EndpointRulesMax is the number of endpoints up to which a Service selects its
	// endpoint with one rule per endpoint rather than with an anonymous map (0 means
	// DefaultEndpointRulesMax; negative means always use a map, as upstream).
	EndpointRulesMax int
	// EndpointMaps selects the endpoint of a Service without session affinity from
	// shared data maps ("dnat ... to ip daddr . tcp dport . numgen random mod N map
	// @service-endpoints-tcp-SS", see endpoints.go) instead of one rule per endpoint,
	// so that replacing an endpoint changes map elements only: no rule, no verdict,
	// hence no re-validation of the table by the kernel (see doc.go). With it,
	// EndpointRulesMax only concerns Services with session affinity.
	EndpointMaps bool
	// NodeIP is this node's primary IP of this family (may be invalid). When a
	// Service's loadBalancerSourceRanges contain it, traffic from the LB VIPs
	// themselves is allowed too, as upstream does.
	NodeIP netip.Addr
	// LocalhostNodePorts is upstream's handling of NodePort traffic to loopback
	// under the KubeProxyNFTablesLocalhostNodePorts feature gate; the zero value
	// (gate off) renders nothing for it.
	LocalhostNodePorts LocalhostNodePorts
}

// LocalhostNodePorts configures upstream's localhost NodePorts (KEP-6032, the
// alpha KubeProxyNFTablesLocalhostNodePorts feature gate). NodePorts are never
// DNATed on loopback; with the gate on, new connections from the node to a
// loopback address and a NodePort of a protocol nothing serves there are rejected
// (filter input, localhost-nodeport-reject-ports) and counted in the named
// counters localhost-nodeport-rejected-<protocol>, as upstream.
type LocalhostNodePorts struct {
	// Enabled is the feature gate. Without Proxied every protocol is rejected.
	Enabled bool
	// Proxied says that a userspace proxy (internal/localnodeports) serves TCP
	// NodePorts on loopback, because nodePortAddresses explicitly includes loopback
	// for this family: only UDP and SCTP are rejected then.
	Proxied bool
}

// LocalhostNodePortRejectableProtocols are the protocols whose localhost NodePort
// traffic may be rejected and counted, in upstream's order.
var LocalhostNodePortRejectableProtocols = []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}

// RejectedProtocols returns the protocols whose localhost NodePort traffic is
// rejected and counted (nil when the gate is off), as upstream's
// localhostNodePortRejectProtocols.
func (l LocalhostNodePorts) RejectedProtocols() []v1.Protocol {
	switch {
	case !l.Enabled:
		return nil
	case l.Proxied:
		return []v1.Protocol{v1.ProtocolUDP, v1.ProtocolSCTP}
	}
	return LocalhostNodePortRejectableProtocols
}

// rejects reports whether localhost NodePort traffic of protocol is rejected.
func (l LocalhostNodePorts) rejects(protocol v1.Protocol) bool {
	return l.Enabled && (!l.Proxied || protocol != v1.ProtocolTCP)
}

// DefaultEndpointRulesMax bounds the rule walk of a new connection to a Service while
// keeping anonymous sets (slow to create in bulk) for large Services only.
const DefaultEndpointRulesMax = 32

func (c *Config) endpointRulesMax() int {
	switch {
	case c.EndpointRulesMax == 0:
		return DefaultEndpointRulesMax
	case c.EndpointRulesMax < 0:
		return 1
	}
	return c.EndpointRulesMax
}

// Validate reports configuration errors that would make the rendered ruleset invalid.
func (c *Config) Validate() error {
	if c.Family != knftables.IPv4Family && c.Family != knftables.IPv6Family {
		return fmt.Errorf("unsupported nftables family %q", c.Family)
	}
	if c.MasqueradeBit < 0 || c.MasqueradeBit > 31 {
		return fmt.Errorf("masquerade bit %d out of range [0, 31]", c.MasqueradeBit)
	}
	if err := c.LocalDetector.Validate(c.Family == knftables.IPv6Family); err != nil {
		return err
	}
	for _, p := range c.ServiceCIDRs {
		if !c.hasFamily(p.Addr()) {
			return fmt.Errorf("service CIDR %s is not of family %s", p, c.Family)
		}
	}
	if c.LocalhostNodePorts.Proxied && !c.LocalhostNodePorts.Enabled {
		return fmt.Errorf("localhost NodePorts: Proxied needs Enabled (the feature gate)")
	}
	return nil
}

func (c *Config) hasFamily(a netip.Addr) bool {
	if c.Family == knftables.IPv6Family {
		return a.Is6() && !a.Is4In6()
	}
	return a.Is4()
}

// ipX is the nft payload protocol keyword of the family ("ip" or "ip6").
func (c *Config) ipX() string {
	if c.Family == knftables.IPv6Family {
		return "ip6"
	}
	return "ip"
}

// addrType is the nft data type of an address of the family.
func (c *Config) addrType() string {
	if c.Family == knftables.IPv6Family {
		return "ipv6_addr"
	}
	return "ipv4_addr"
}

func (c *Config) masqueradeMark() string {
	return fmt.Sprintf("%#x", uint32(1)<<uint(c.MasqueradeBit))
}

// masqueradeRule marks a packet for masquerading in the masquerading chain.
func (c *Config) masqueradeRule() string {
	return "mark set mark or " + c.masqueradeMark()
}

func (c *Config) matchLocalhost() string {
	if c.Family == knftables.IPv6Family {
		return "ip6 daddr ::1"
	}
	return "ip daddr 127.0.0.0/8"
}

func (c *Config) matchNotLocalhost() string {
	if c.Family == knftables.IPv6Family {
		return "ip6 daddr != ::1"
	}
	return "ip daddr != 127.0.0.0/8"
}

// localDetectorImplemented reports whether traffic from local pods can be recognized.
func (c *Config) localDetectorImplemented() bool { return c.LocalDetector.Implemented() }

// ifLocal returns the match for traffic from a local pod ("" when not implemented).
func (c *Config) ifLocal() string { return c.localMatch(false) }

// ifNotLocal returns the match for traffic not from a local pod.
func (c *Config) ifNotLocal() string { return c.localMatch(true) }

func (c *Config) localMatch(negate bool) string {
	op := ""
	if negate {
		op = "!= "
	}
	d := c.LocalDetector
	switch d.Mode {
	case model.DetectClusterCIDR, model.DetectNodeCIDR:
		return c.ipX() + " saddr " + op + prefixSet(d.CIDRs)
	case model.DetectBridgeInterface:
		return "iifname " + op + d.BridgeInterface
	case model.DetectInterfaceNamePrefix:
		return "iifname " + op + d.InterfaceNamePrefix + "*"
	}
	return ""
}

// prefixSet renders one prefix bare, several as an anonymous set.
func prefixSet(prefixes []netip.Prefix) string {
	if len(prefixes) == 1 {
		return prefixes[0].Masked().String()
	}
	parts := make([]string, len(prefixes))
	for i, p := range prefixes {
		parts[i] = p.Masked().String()
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}
