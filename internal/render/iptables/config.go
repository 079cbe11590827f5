package iptables

import (
	"fmt"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/model"
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

// Tables returns the tables kproxy writes in, in that order.
func Tables() []Table { return slices.Clone(tables) }

// Config is everything besides Services that shapes the rules of one family.
type Config struct {
	// Family is v1.IPv4Protocol or v1.IPv6Protocol.
	Family            v1.IPFamily
	NodePortAddresses model.NodePortAddresses
	LocalDetector     model.LocalDetector
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
	return ValidateCommon(c.Family, c.MasqueradeBit, &c.LocalDetector, &c.NodePortAddresses)
}

// ValidateCommon reports errors in the settings that the iptables and ipvs modes'
// rules share: the family, the masquerade bit, the local-traffic detector and the
// NodePort addresses.
func ValidateCommon(family v1.IPFamily, masqueradeBit int32, detector *model.LocalDetector, nodePorts *model.NodePortAddresses) error {
	if family != v1.IPv4Protocol && family != v1.IPv6Protocol {
		return fmt.Errorf("unsupported IP family %q", family)
	}
	if masqueradeBit < 0 || masqueradeBit > 31 {
		return fmt.Errorf("masquerade bit %d out of range [0, 31]", masqueradeBit)
	}
	if err := detector.Validate(family == v1.IPv6Protocol); err != nil {
		return err
	}
	for _, ip := range nodePorts.IPs {
		if !model.InFamily(ip, family) {
			return fmt.Errorf("NodePort address %s is not of family %s", ip, family)
		}
	}
	return nil
}

func (c *Config) isIPv6() bool { return c.Family == v1.IPv6Protocol }

func (c *Config) hasFamily(a netip.Addr) bool { return model.InFamily(a, c.Family) }

// localhostNodePorts reports whether NodePorts are served on 127.0.0.0/8.
func (c *Config) localhostNodePorts() bool { return c.LocalhostNodePorts && !c.isIPv6() }

// masqueradeMark is the mark as iptables-save prints it ("0x4000").
func (c *Config) masqueradeMark() string { return MasqueradeMark(c.MasqueradeBit) }

func (c *Config) localDetectorImplemented() bool { return c.LocalDetector.Implemented() }

// ifLocal adds to b the match of traffic from a local pod.
func (c *Config) ifLocal(b *Rule) { c.localMatch(b, false) }

// ifNotLocal adds to b the match of traffic not from a local pod.
func (c *Config) ifNotLocal(b *Rule) { c.localMatch(b, true) }

func (c *Config) localMatch(b *Rule, negate bool) { b.MatchLocal(&c.LocalDetector, negate) }
