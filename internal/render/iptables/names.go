package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"

	"github.com/kproxy/kproxy/internal/model"
)

// Names of the chains that are not per Service. They are upstream's: other software
// on the node (CNI plugins, NodeLocal DNSCache, monitoring) relies on them.
const (
	ChainServices         = "KUBE-SERVICES"          // nat and filter
	ChainExternalServices = "KUBE-EXTERNAL-SERVICES" // filter
	ChainNodePorts        = "KUBE-NODEPORTS"         // nat and filter
	ChainPostrouting      = "KUBE-POSTROUTING"       // nat
	ChainMarkMasq         = "KUBE-MARK-MASQ"         // nat
	ChainForward          = "KUBE-FORWARD"           // filter
	ChainProxyFirewall    = "KUBE-PROXY-FIREWALL"    // filter
	// ChainCanary is created (empty) in mangle, nat and filter by the canary
	// monitor, which notices a flush of the tables when it disappears.
	ChainCanary = "KUBE-PROXY-CANARY"
	// ChainKubeletFirewall is kubelet's chain; upstream's proxier ensures it and its
	// jumps and, with localhost NodePorts, writes the martian-packet drop into it.
	ChainKubeletFirewall = "KUBE-FIREWALL"
)

// Prefixes of per-ServicePort chains (nat table), as upstream.
const (
	PrefixClusterPolicy = "KUBE-SVC-"
	PrefixLocalPolicy   = "KUBE-SVL-"
	PrefixExternal      = "KUBE-EXT-"
	PrefixFirewall      = "KUBE-FW-"
	PrefixEndpoint      = "KUBE-SEP-"
)

var servicePrefixes = []string{PrefixClusterPolicy, PrefixLocalPolicy, PrefixEndpoint, PrefixFirewall, PrefixExternal}

// IsServiceChain reports whether name is a per-ServicePort chain of kube-proxy's
// iptables mode (upstream's isServiceChainName): one of ours, or a leftover of a
// previous kproxy or kube-proxy, to delete when no Service renders it.
func IsServiceChain(name string) bool {
	for _, p := range servicePrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// serviceNames are the names of the per-ServicePort chains of one ServicePort.
type serviceNames struct {
	// port is upstream's svcPortNameString ("ns/name:port"), used in comments.
	port                                           string
	protocol                                       string
	clusterPolicy, localPolicy, external, firewall string
}

func namesFor(name *model.ServicePortName) serviceNames {
	port := name.String()
	proto := strings.ToLower(string(name.Protocol))
	hash := portProtoHash(port, proto)
	return serviceNames{
		port:          port,
		protocol:      proto,
		clusterPolicy: PrefixClusterPolicy + hash,
		localPolicy:   PrefixLocalPolicy + hash,
		external:      PrefixExternal + hash,
		firewall:      PrefixFirewall + hash,
	}
}

// policy names the Local-policy chain (local) or the Cluster-policy one, as
// model.Routing designates them.
func (n *serviceNames) policy(local bool) string {
	if local {
		return n.localPolicy
	}
	return n.clusterPolicy
}

// endpointChain is upstream's servicePortEndpointChainName: KUBE-SEP- and 16 base32
// characters of the SHA-256 of "ns/name:port" + protocol + "ip:port".
func (n serviceNames) endpointChain(ep *model.Endpoint) string {
	return PrefixEndpoint + hash16(n.port+n.protocol+ep.String())
}

// portProtoHash is upstream's: 16 base32 characters of the SHA-256 of the port name
// and protocol, so that names fit the 28-character limit of iptables chain names.
func portProtoHash(servicePortName, protocol string) string {
	return hash16(servicePortName + protocol)
}

func hash16(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(sum[:])[:16]
}
