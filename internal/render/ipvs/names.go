package ipvs

import (
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/ipset"
)

// Names of the chains of the ipvs mode that the iptables mode does not have (the
// others are render/iptables' ChainServices, ChainPostrouting, ChainMarkMasq,
// ChainForward and ChainProxyFirewall). They are upstream's: other software and
// upstream's cleanup know them.
const (
	// ChainNodePort (nat and filter) is the ipvs mode's; the iptables mode's is
	// KUBE-NODEPORTS.
	ChainNodePort             = "KUBE-NODE-PORT"
	ChainLoadBalancer         = "KUBE-LOAD-BALANCER"          // nat
	ChainSourceRangesFirewall = "KUBE-SOURCE-RANGES-FIREWALL" // filter
	// ChainIPVSFilter rejects traffic to Service addresses on ports that no
	// virtual server serves (kubernetes#72236).
	ChainIPVSFilter = "KUBE-IPVS-FILTER" // filter
	// ChainIPVSOutFilter keeps the node from reaching LB VIPs whose source ranges
	// do not hold the node IP (kubernetes#119656).
	ChainIPVSOutFilter = "KUBE-IPVS-OUT-FILTER" // filter
)

// DummyDevice is the interface that holds every Service address (upstream's
// defaultDummyDevice), so that the node accepts packets to them for IPVS.
const DummyDevice = "kube-ipvs0"

// SetID names one of upstream's ipsets (ipset.go's ipsetInfo).
type SetID int

// The sets, in upstream's ipsetInfo order.
const (
	SetLoopBack SetID = iota
	SetClusterIP
	SetExternalIP
	SetExternalIPLocal
	SetLoadBalancer
	SetLoadBalancerFW
	SetLoadBalancerLocal
	SetLoadBalancerSourceIP
	SetLoadBalancerSourceCIDR
	SetNodePortTCP
	SetNodePortLocalTCP
	SetNodePortUDP
	SetNodePortLocalUDP
	SetNodePortSCTP
	SetNodePortLocalSCTP
	SetHealthCheckNodePort
	SetIPVSAddresses
	numSets
)

type setDef struct {
	name    string
	typ     ipset.Type
	comment string
}

// setDefs are upstream's names (IPv4), types and comments; the comments are also
// those of the iptables rules matching the sets.
var setDefs = [numSets]setDef{
	SetLoopBack:               {"KUBE-LOOP-BACK", ipset.HashIPPortIP, "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose"},
	SetClusterIP:              {"KUBE-CLUSTER-IP", ipset.HashIPPort, "Kubernetes service cluster ip + port for masquerade purpose"},
	SetExternalIP:             {"KUBE-EXTERNAL-IP", ipset.HashIPPort, "Kubernetes service external ip + port for masquerade and filter purpose"},
	SetExternalIPLocal:        {"KUBE-EXTERNAL-IP-LOCAL", ipset.HashIPPort, "Kubernetes service external ip + port with externalTrafficPolicy=local"},
	SetLoadBalancer:           {"KUBE-LOAD-BALANCER", ipset.HashIPPort, "Kubernetes service lb portal"},
	SetLoadBalancerFW:         {"KUBE-LOAD-BALANCER-FW", ipset.HashIPPort, "Kubernetes service load balancer ip + port for load balancer with sourceRange"},
	SetLoadBalancerLocal:      {"KUBE-LOAD-BALANCER-LOCAL", ipset.HashIPPort, "Kubernetes service load balancer ip + port with externalTrafficPolicy=local"},
	SetLoadBalancerSourceIP:   {"KUBE-LOAD-BALANCER-SOURCE-IP", ipset.HashIPPortIP, "Kubernetes service load balancer ip + port + source IP for packet filter purpose"},
	SetLoadBalancerSourceCIDR: {"KUBE-LOAD-BALANCER-SOURCE-CIDR", ipset.HashIPPortNet, "Kubernetes service load balancer ip + port + source cidr for packet filter purpose"},
	SetNodePortTCP:            {"KUBE-NODE-PORT-TCP", ipset.BitmapPort, "Kubernetes nodeport TCP port for masquerade purpose"},
	SetNodePortLocalTCP:       {"KUBE-NODE-PORT-LOCAL-TCP", ipset.BitmapPort, "Kubernetes nodeport TCP port with externalTrafficPolicy=local"},
	SetNodePortUDP:            {"KUBE-NODE-PORT-UDP", ipset.BitmapPort, "Kubernetes nodeport UDP port for masquerade purpose"},
	SetNodePortLocalUDP:       {"KUBE-NODE-PORT-LOCAL-UDP", ipset.BitmapPort, "Kubernetes nodeport UDP port with externalTrafficPolicy=local"},
	SetNodePortSCTP:           {"KUBE-NODE-PORT-SCTP-HASH", ipset.HashIPPort, "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'"},
	SetNodePortLocalSCTP:      {"KUBE-NODE-PORT-LOCAL-SCTP-HASH", ipset.HashIPPort, "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'"},
	SetHealthCheckNodePort:    {"KUBE-HEALTH-CHECK-NODE-PORT", ipset.BitmapPort, "Kubernetes health check node port"},
	SetIPVSAddresses:          {"KUBE-IPVS-IPS", ipset.HashIP, "Addresses on the ipvs interface"},
}

// maxSetName is the longest name the kernel takes (IPSET_MAXNAMELEN less the NUL).
const maxSetName = 31

// SetName is the set's name in family: upstream's IPv6 sets are "KUBE-6-...", cut
// to 31 characters (KUBE-6-NODE-PORT-LOCAL-SCTP-HAS and
// KUBE-6-LOAD-BALANCER-SOURCE-CID, as upstream names them).
func SetName(id SetID, family v1.IPFamily) string {
	name := setDefs[id].name
	if family == v1.IPv6Protocol {
		name = strings.Replace(name, "KUBE-", "KUBE-6-", 1)
		if len(name) > maxSetName {
			name = name[:maxSetName]
		}
	}
	return name
}

// Set is the definition of one set in family.
func Set(id SetID, family v1.IPFamily) ipset.Set {
	d := &setDefs[id]
	return ipset.Set{Name: SetName(id, family), Type: d.typ, Family: family, Comment: d.comment}
}

// Sets are the definitions of every set of the ipvs mode in family, in upstream's
// order: the proxier creates them all, empty or not (and --cleanup deletes them).
func Sets(family v1.IPFamily) []ipset.Set {
	out := make([]ipset.Set, numSets)
	for id := range numSets {
		out[id] = Set(id, family)
	}
	return out
}

// nodePortSets are the NodePort set and its externalTrafficPolicy=Local
// counterpart of a protocol ("tcp", "udp", "sctp").
func nodePortSets(proto string) (all, local SetID, ok bool) {
	switch proto {
	case "tcp":
		return SetNodePortTCP, SetNodePortLocalTCP, true
	case "udp":
		return SetNodePortUDP, SetNodePortLocalUDP, true
	case "sctp":
		return SetNodePortSCTP, SetNodePortLocalSCTP, true
	}
	return 0, 0, false
}
