package nftables

import (
	"crypto/sha256"
	"encoding/base32"
	"net/netip"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
)

// Names of the table-wide objects. They are upstream's names, so that tools and
// people who know upstream's ruleset find their way.
const (
	chainFilterPreroutingPreDNAT = "filter-prerouting-pre-dnat"
	chainFilterOutputPreDNAT     = "filter-output-pre-dnat"
	chainFilterInput             = "filter-input"
	chainFilterForward           = "filter-forward"
	chainFilterOutput            = "filter-output"
	chainNATPrerouting           = "nat-prerouting"
	chainNATOutput               = "nat-output"
	chainNATPostrouting          = "nat-postrouting"

	chainServices              = "services"
	chainMasquerading          = "masquerading"
	chainClusterIPsCheck       = "cluster-ips-check"
	chainServiceEndpointsCheck = "service-endpoints-check"
	chainNodePortEndpointsChk  = "nodeport-endpoints-check"
	chainFirewallCheck         = "firewall-check"
	chainReject                = "reject-chain"

	setClusterIPs          = "cluster-ips"
	setNodePortIPs         = "nodeport-ips"
	setHairpinConnections  = "hairpin-connections"
	mapServiceIPs          = "service-ips"
	mapServiceNodePorts    = "service-nodeports"
	mapNoEndpointServices  = "no-endpoint-services"
	mapNoEndpointNodePorts = "no-endpoint-nodeports"
	mapFirewallIPs         = "firewall-ips"

	// Localhost NodePorts (Config.LocalhostNodePorts), upstream's names.
	mapLocalhostNodePortReject          = "localhost-nodeport-reject-ports"
	prefixLocalhostNodePortRejectChain  = "localhost-nodeport-reject-"
	prefixLocalhostNodePortRejectedCntr = "localhost-nodeport-rejected-"
)

// localhostNodePortRejectChain names the chain that counts and rejects localhost
// NodePort traffic of protocol ("localhost-nodeport-reject-udp").
func localhostNodePortRejectChain(protocol v1.Protocol) string {
	return prefixLocalhostNodePortRejectChain + strings.ToLower(string(protocol))
}

// LocalhostNodePortRejectedCounter names the nftables counter of the rejected
// localhost NodePort packets of protocol ("localhost-nodeport-rejected-udp"), which
// kubeproxy_nftables_localhost_nodeport_rejected_packets_total reports.
func LocalhostNodePortRejectedCounter(protocol v1.Protocol) string {
	return prefixLocalhostNodePortRejectedCntr + strings.ToLower(string(protocol))
}

// Prefixes of per-service object names.
const (
	prefixClusterPolicy = "service-"
	prefixLocalPolicy   = "local-"
	prefixExternal      = "external-"
	prefixFirewall      = "firewall-"
	prefixEndpoint      = "endpoint-"
	prefixAffinity      = "affinity-"

	// prefixMax bounds the prefixes above so that a full name fits NameLengthMax.
	prefixMax   = 16
	nameBaseMax = knftables.NameLengthMax - prefixMax
)

// serviceNames are the names of the per-service objects of one ServicePort.
type serviceNames struct {
	clusterPolicy, localPolicy, external, firewall string
}

// policy names the Local-policy chain (local) or the Cluster-policy one, as
// model.Routing designates them.
func (n *serviceNames) policy(local bool) string {
	if local {
		return n.localPolicy
	}
	return n.clusterPolicy
}

func namesFor(name *model.ServicePortName) serviceNames {
	base := serviceNameBase(name)
	return serviceNames{
		clusterPolicy: prefixClusterPolicy + base,
		localPolicy:   prefixLocalPolicy + base,
		external:      prefixExternal + base,
		firewall:      prefixFirewall + base,
	}
}

// serviceNameBase is "HASH-namespace/name/protocol/port". Namespace, Service and port
// names use [a-z0-9-], all valid in nft names; "/" separates them because it cannot
// appear in any of them. The leading hash (of the whole name) keeps names unique even
// if truncated. Full names start with one of the prefixes above, so with a letter, as
// nft requires.
func serviceNameBase(name *model.ServicePortName) string {
	return hashAndTruncate(name.Namespace + "/" + name.Name + "/" + strings.ToLower(string(name.Protocol)) + "/" + name.Port)
}

// endpointNameBase is "HASH-namespace/name/protocol/port__ip/port" with the colons of
// IPv6 addresses replaced by dots (colons are not allowed in nft names).
func endpointNameBase(name *model.ServicePortName, ep netip.AddrPort) string {
	ip := strings.ReplaceAll(ep.Addr().String(), ":", ".")
	return hashAndTruncate(name.Namespace + "/" + name.Name + "/" + strings.ToLower(string(name.Protocol)) + "/" + name.Port +
		"__" + ip + "/" + strconv.Itoa(int(ep.Port())))
}

// hashAndTruncate prefixes s with 8 base32 characters of its SHA-256 and truncates the
// result to nameBaseMax. The hash keeps names unique after truncation and makes names
// that differ in one digit visually distinct.
func hashAndTruncate(s string) string {
	sum := sha256.Sum256([]byte(s))
	name := base32.StdEncoding.EncodeToString(sum[:])[:8] + "-" + s
	if len(name) > nameBaseMax {
		name = name[:nameBaseMax-3] + "..."
	}
	return name
}

// affinitySetName names the affinity set of one endpoint. The hash also covers the
// timeout: a set's timeout cannot be changed in place, so a new timeout yields a new
// set (and new rules referencing it), which the diff swaps in atomically.
func affinitySetName(name *model.ServicePortName, ep netip.AddrPort, timeoutSeconds int32) string {
	ip := strings.ReplaceAll(ep.Addr().String(), ":", ".")
	s := name.Namespace + "/" + name.Name + "/" + strings.ToLower(string(name.Protocol)) + "/" + name.Port +
		"__" + ip + "/" + strconv.Itoa(int(ep.Port()))
	sum := sha256.Sum256([]byte(s + "\x00" + strconv.Itoa(int(timeoutSeconds))))
	n := prefixAffinity + base32.StdEncoding.EncodeToString(sum[:])[:8] + "-" + s
	if len(n) > knftables.NameLengthMax {
		n = n[:knftables.NameLengthMax-3] + "..."
	}
	return n
}
