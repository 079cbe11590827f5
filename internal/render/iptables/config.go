package iptables

import (
	"fmt"
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Table is an iptables table the renderer writes to.
type Table string

// The tables of kproxy's rules (upstream's: per-service chains live in nat only).
const (
	TableFilter Table = "filter"
	TableNAT    Table = "nat"
)

// tables is the order in which restore inputs and dumps list the tables (upstream
// writes filter first).
var tables = []Table{TableFilter, TableNAT}

// NodePortAddresses says on which destination addresses NodePorts are served.
type NodePortAddresses struct {
	// All serves NodePorts on every local address ("-m addrtype --dst-type LOCAL"),
	// minus loopback unless localhost NodePorts apply.
	All bool
	// IPs are the node addresses of this family serving NodePorts when All is false
	// (one KUBE-NODEPORTS jump each). Loopback addresses are skipped, except IPv4
	// ones when Config.LocalhostNodePorts is set, as upstream.
	IPs []netip.Addr
}

// LocalDetectMode selects how traffic from pods on this node is recognized.
type LocalDetectMode string

// Local traffic detectors (upstream's LocalTrafficDetector implementations).
const (
	// DetectNone disables local-traffic detection (upstream's no-op detector).
	DetectNone LocalDetectMode = ""
	// DetectClusterCIDR matches sources in the cluster's pod CIDR ("-s CIDR").
	DetectClusterCIDR LocalDetectMode = "ClusterCIDR"
	// DetectNodeCIDR matches sources in this node's pod CIDR ("-s CIDR").
	DetectNodeCIDR LocalDetectMode = "NodeCIDR"
	// DetectBridgeInterface matches traffic arriving on the pod bridge ("-i NAME").
	DetectBridgeInterface LocalDetectMode = "BridgeInterface"
	// DetectInterfaceNamePrefix matches traffic arriving on interfaces whose name
	// has the prefix ("-i PREFIX+").
	DetectInterfaceNamePrefix LocalDetectMode = "InterfaceNamePrefix"
)

// LocalDetector configures the local traffic detector.
type LocalDetector struct {
	Mode LocalDetectMode
	// CIDR is this family's cluster CIDR (ClusterCIDR) or this node's pod CIDR
	// (NodeCIDR): upstream uses the first one of the family, as iptables cannot
	// negate a list of sources in one rule.
	CIDR                netip.Prefix
	BridgeInterface     string
	InterfaceNamePrefix string
}

// Config is everything besides Services that shapes the rules of one family.
type Config struct {
	// Family is v1.IPv4Protocol or v1.IPv6Protocol.
	Family            v1.IPFamily
	NodePortAddresses NodePortAddresses
	LocalDetector     LocalDetector
	// MasqueradeBit is the bit of the packet mark that requests masquerading
	// (upstream default 14, mark 0x4000).
	MasqueradeBit int32
	// MasqueradeAll masquerades all traffic to ClusterIPs.
	MasqueradeAll bool
	// NodeIP is this node's primary IP of this family (may be invalid). When a
	// Service's loadBalancerSourceRanges contain it, traffic from the LB VIPs
	// themselves is allowed too, as upstream does.
	NodeIP netip.Addr
	// LocalhostNodePorts serves NodePorts on 127.0.0.0/8 (IPv4 only; ignored for
	// IPv6, as upstream). The caller sets it when iptables.localhostNodePorts is on
	// and nodePortAddresses include IPv4 loopback (upstream's rule), and must set
	// net.ipv4.conf.all.route_localnet=1. The renderer then adds the KUBE-FIREWALL
	// rule that drops martian packets to 127.0.0.0/8 from elsewhere.
	LocalhostNodePorts bool
	// TCPBeLiberal omits the drop of conntrack-INVALID packets in KUBE-FORWARD, as
	// upstream does when net.netfilter.nf_conntrack_tcp_be_liberal is set.
	TCPBeLiberal bool
	// LargeCluster drops the comments of endpoint rules (KUBE-SEP-* chains and the
	// jumps to them), as upstream does above 1000 endpoints to keep the rules small.
	LargeCluster bool
	// CountInvalidDrops and CountLocalhostNodePorts add upstream's "-m nfacct"
	// matches (counters ct_state_invalid_dropped_pkts and localhost_nps_accepted_pkts)
	// for the kubeproxy_iptables_* packet metrics. Set them only once the counters
	// exist: a rule naming a missing counter makes the restore fail.
	CountInvalidDrops       bool
	CountLocalhostNodePorts bool
}

// nfacct counter names, as upstream's (and internal/metrics').
const (
	nfacctInvalidDropped    = "ct_state_invalid_dropped_pkts"
	nfacctLocalhostAccepted = "localhost_nps_accepted_pkts"
)

// Validate reports configuration errors that would make the rendered rules invalid.
func (c *Config) Validate() error {
	if c.Family != v1.IPv4Protocol && c.Family != v1.IPv6Protocol {
		return fmt.Errorf("unsupported IP family %q", c.Family)
	}
	if c.MasqueradeBit < 0 || c.MasqueradeBit > 31 {
		return fmt.Errorf("masquerade bit %d out of range [0, 31]", c.MasqueradeBit)
	}
	d := c.LocalDetector
	switch d.Mode {
	case DetectNone:
	case DetectClusterCIDR, DetectNodeCIDR:
		if !d.CIDR.IsValid() {
			return fmt.Errorf("local detector %s needs a CIDR", d.Mode)
		}
		if !c.hasFamily(d.CIDR.Addr()) {
			return fmt.Errorf("local detector CIDR %s is not of family %s", d.CIDR, c.Family)
		}
	case DetectBridgeInterface:
		if !validInterfaceName(d.BridgeInterface) {
			return fmt.Errorf("invalid bridge interface name %q", d.BridgeInterface)
		}
	case DetectInterfaceNamePrefix:
		if !validInterfaceName(d.InterfaceNamePrefix) {
			return fmt.Errorf("invalid interface name prefix %q", d.InterfaceNamePrefix)
		}
	default:
		return fmt.Errorf("unknown local detector mode %q", d.Mode)
	}
	for _, ip := range c.NodePortAddresses.IPs {
		if !c.hasFamily(ip) {
			return fmt.Errorf("NodePort address %s is not of family %s", ip, c.Family)
		}
	}
	return nil
}

// validInterfaceName accepts names iptables takes for "-i" (at most 15 bytes, and
// characters that need no quoting: the rule text must be what iptables-save prints).
func validInterfaceName(name string) bool {
	if name == "" || len(name) > 15 {
		return false
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.@", r)
		if !ok {
			return false
		}
	}
	return true
}

func (c *Config) isIPv6() bool { return c.Family == v1.IPv6Protocol }

func (c *Config) hasFamily(a netip.Addr) bool {
	if c.isIPv6() {
		return a.Is6() && !a.Is4In6()
	}
	return a.Is4()
}

// localhostNodePorts reports whether NodePorts are served on 127.0.0.0/8.
func (c *Config) localhostNodePorts() bool { return c.LocalhostNodePorts && !c.isIPv6() }

// masqueradeMark is the mark as iptables-save prints it ("0x4000").
func (c *Config) masqueradeMark() string {
	return fmt.Sprintf("%#x", uint32(1)<<uint(c.MasqueradeBit))
}

func (c *Config) localDetectorImplemented() bool { return c.LocalDetector.Mode != DetectNone }

// ifLocal adds to b the match of traffic from a local pod.
func (c *Config) ifLocal(b *rule) { c.localMatch(b, false) }

// ifNotLocal adds to b the match of traffic not from a local pod.
func (c *Config) ifNotLocal(b *rule) { c.localMatch(b, true) }

func (c *Config) localMatch(b *rule, negate bool) {
	d := c.LocalDetector
	switch d.Mode {
	case DetectClusterCIDR, DetectNodeCIDR:
		b.source(d.CIDR.Masked().String(), negate)
	case DetectBridgeInterface:
		b.inInterface(d.BridgeInterface, negate)
	case DetectInterfaceNamePrefix:
		b.inInterface(d.InterfaceNamePrefix+"+", negate)
	}
}
