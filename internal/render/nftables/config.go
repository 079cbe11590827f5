package nftables

import (
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/nft"
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

// nftFamily is the family of the typed rules.
func (c *Config) nftFamily() nft.Family {
	if c.Family == knftables.IPv6Family {
		return nft.IPv6
	}
	return nft.IPv4
}

// setTypes are the types of the family's sets and maps.
func (c *Config) setTypes() *familySetTypes { return setTypes[c.nftFamily()] }

func (c *Config) masqueradeMark() uint32 { return uint32(1) << uint(c.MasqueradeBit) }

// masqueradeRule marks a packet for masquerading in the masquerading chain.
func (c *Config) masqueradeRule() nft.Stmt {
	return nft.MarkSet{Op: nft.BitOr, Value: c.masqueradeMark()}
}

// matchLocalhost matches loopback destinations ("ip daddr 127.0.0.0/8", "ip6 daddr
// ::1"); negate matches the others.
func (c *Config) matchLocalhost(negate bool) nft.Stmt {
	m := nft.Match{Keys: c.daddr(), Neq: negate, Value: nft.Addr(netip.IPv6Loopback())}
	if c.Family != knftables.IPv6Family {
		m.Value = nft.Prefix(netip.MustParsePrefix("127.0.0.0/8"))
	}
	return m
}

// saddr and daddr are the keys of the family's source and destination addresses;
// the slices are shared by every rule (rules are immutable).
func (c *Config) saddr() []nft.Key { return familyKeys[c.nftFamily()].saddr }
func (c *Config) daddr() []nft.Key { return familyKeys[c.nftFamily()].daddr }

// dispatchKey is "ip daddr . meta l4proto . th dport", the key of the dispatch maps.
func (c *Config) dispatchKey() []nft.Key { return familyKeys[c.nftFamily()].dispatch }

// hairpinKey is "ip saddr . ip daddr . meta l4proto . th dport".
func (c *Config) hairpinKey() []nft.Key { return familyKeys[c.nftFamily()].hairpin }

// portKey is "meta l4proto . th dport", the key of the NodePort maps.
var portKey = []nft.Key{nft.L4Proto, nft.THDport}

type keysOfFamily struct{ saddr, daddr, dispatch, hairpin []nft.Key }

var familyKeys = map[nft.Family]keysOfFamily{nft.IPv4: newKeysOfFamily(nft.IPv4), nft.IPv6: newKeysOfFamily(nft.IPv6)}

func newKeysOfFamily(f nft.Family) keysOfFamily {
	s, d := nft.Saddr(f), nft.Daddr(f)
	return keysOfFamily{
		saddr:    []nft.Key{s},
		daddr:    []nft.Key{d},
		dispatch: []nft.Key{d, nft.L4Proto, nft.THDport},
		hairpin:  []nft.Key{s, d, nft.L4Proto, nft.THDport},
	}
}

// localDetectorImplemented reports whether traffic from local pods can be recognized.
func (c *Config) localDetectorImplemented() bool { return c.LocalDetector.Implemented() }

// ifLocal returns the match for traffic from a local pod (nil when not implemented).
func (c *Config) ifLocal() nft.Stmt { return c.localMatch(false) }

// ifNotLocal returns the match for traffic not from a local pod.
func (c *Config) ifNotLocal() nft.Stmt { return c.localMatch(true) }

func (c *Config) localMatch(negate bool) nft.Stmt {
	d := c.LocalDetector
	switch d.Mode {
	case model.DetectClusterCIDR, model.DetectNodeCIDR:
		return nft.Match{Keys: c.saddr(), Neq: negate, Value: prefixSet(d.CIDRs)}
	case model.DetectBridgeInterface:
		return nft.Match{Keys: []nft.Key{nft.IIFName}, Neq: negate, Value: nft.Ifname{Name: d.BridgeInterface}}
	case model.DetectInterfaceNamePrefix:
		return nft.Match{Keys: []nft.Key{nft.IIFName}, Neq: negate, Value: nft.Ifname{Name: d.InterfaceNamePrefix, Wildcard: true}}
	}
	return nil
}

// prefixSet is one prefix bare, several an anonymous set.
func prefixSet(prefixes []netip.Prefix) nft.Value {
	if len(prefixes) == 1 {
		return nft.Prefix(prefixes[0].Masked())
	}
	set := make(nft.Set, len(prefixes))
	for i, p := range prefixes {
		set[i] = nft.Prefix(p.Masked())
	}
	return set
}

// protocol is the nft protocol of a Service protocol; ok is false for protocols
// other than TCP, UDP and SCTP (the only ones the API server admits).
func protocol(p v1.Protocol) (proto nft.Proto, ok bool) {
	switch p {
	case v1.ProtocolTCP:
		return nft.TCP, true
	case v1.ProtocolUDP:
		return nft.UDP, true
	case v1.ProtocolSCTP:
		return nft.SCTP, true
	}
	return 0, false
}
