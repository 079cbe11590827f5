package model

import (
	"fmt"
	"net/netip"
	"strings"
)

// NodePortAddresses says on which destination addresses of this node NodePorts are
// served, for one IP family. Every mode's renderer takes it as it is.
type NodePortAddresses struct {
	// All serves NodePorts on every local address of the node, except loopback (the
	// iptables mode adds 127.0.0.0/8 with localhost NodePorts, as upstream).
	All bool
	// IPs are the resolved node addresses of this family serving NodePorts when All
	// is false. Loopback addresses are ignored, as upstream does (the iptables mode
	// keeps IPv4 ones with localhost NodePorts).
	IPs []netip.Addr
}

// LocalDetectMode selects how traffic from pods on this node is recognized
// (upstream's LocalTrafficDetector implementations).
type LocalDetectMode string

const (
	// DetectNone disables local-traffic detection (upstream's no-op detector).
	DetectNone LocalDetectMode = ""
	// DetectClusterCIDR matches sources in the cluster's pod CIDRs.
	DetectClusterCIDR LocalDetectMode = "ClusterCIDR"
	// DetectNodeCIDR matches sources in this node's pod CIDRs.
	DetectNodeCIDR LocalDetectMode = "NodeCIDR"
	// DetectBridgeInterface matches traffic arriving on the pod bridge interface.
	DetectBridgeInterface LocalDetectMode = "BridgeInterface"
	// DetectInterfaceNamePrefix matches traffic arriving on interfaces whose name has
	// the prefix (e.g. "veth").
	DetectInterfaceNamePrefix LocalDetectMode = "InterfaceNamePrefix"
)

// LocalDetector configures the local traffic detector of one IP family.
type LocalDetector struct {
	Mode LocalDetectMode
	// CIDRs are this family's cluster CIDRs (ClusterCIDR mode) or this node's pod
	// CIDRs (NodeCIDR mode). The iptables mode matches the first one only, as
	// upstream: iptables cannot negate a list of sources in one rule.
	CIDRs               []netip.Prefix
	BridgeInterface     string
	InterfaceNamePrefix string
}

// Implemented reports whether traffic from local pods can be recognized.
func (d *LocalDetector) Implemented() bool { return d.Mode != DetectNone }

// Validate reports a detector no renderer can write for the IP family (ipv6 or
// not): a CIDR mode without CIDRs of that family, an interface name that nft and
// iptables would not take as written, or an unknown mode.
func (d *LocalDetector) Validate(ipv6 bool) error {
	switch d.Mode {
	case DetectNone:
	case DetectClusterCIDR, DetectNodeCIDR:
		if len(d.CIDRs) == 0 {
			return fmt.Errorf("local detector %s needs at least one CIDR", d.Mode)
		}
		for _, p := range d.CIDRs {
			if !p.IsValid() || p.Addr().Is6() != ipv6 || p.Addr().Is4In6() {
				return fmt.Errorf("local detector CIDR %s is not of the %s family", p, familyName(ipv6))
			}
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
	return nil
}

func familyName(ipv6 bool) string {
	if ipv6 {
		return "IPv6"
	}
	return "IPv4"
}

// validInterfaceName accepts interface names (at most 15 bytes, IFNAMSIZ less the
// NUL) whose characters need no quoting in nft or iptables rule text, so that the
// rendered text is exactly what the kernel's listing prints back.
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
