package inspect

import (
	"time"

	"github.com/kproxy/kproxy/internal/drift"
)

// APIVersion is the version of every document this package serves; PathPrefix is
// where it serves them.
const (
	APIVersion = "kproxy.io/v1alpha1"
	PathPrefix = "/kproxy/v1alpha1/"
)

// Node is the node-level document.
type Node struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	NodeName   string       `json:"nodeName"`
	Mode       string       `json:"mode"`
	Families   []NodeFamily `json:"families"`
}

// NodeFamily is what one IP family's proxier works with.
type NodeFamily struct {
	Family string `json:"family"`
	// Zone is the node's topology zone, as last committed ("" when unlabelled).
	Zone string `json:"zone"`
	// Services and ServicePorts count what the model holds.
	ServicePorts int `json:"servicePorts"`
	// NodePortAddresses: "all" or the node's addresses that serve NodePorts.
	NodePortAddresses []string      `json:"nodePortAddresses"`
	LocalDetector     LocalDetector `json:"localDetector"`
	// ServiceCIDRs (nftables mode): ClusterIPs inside them that no Service holds are
	// rejected.
	ServiceCIDRs []string `json:"serviceCIDRs,omitempty"`
	// Syncs are the last syncs, newest first.
	Syncs []Sync `json:"syncs"`
	// LastDriftCheck is the last background comparison of the kernel with what
	// was applied (nil before the first, or when the mode makes none).
	LastDriftCheck *drift.Report `json:"lastDriftCheck,omitempty"`
}

// LocalDetector is how traffic from this node's pods is recognized.
type LocalDetector struct {
	// Mode is ClusterCIDR, NodeCIDR, BridgeInterface, InterfaceNamePrefix, or
	// "None" (no detection: traffic from pods is treated as external).
	Mode      string   `json:"mode"`
	CIDRs     []string `json:"cidrs,omitempty"`
	Interface string   `json:"interface,omitempty"`
}

// Sync is one sync of one family.
type Sync struct {
	Start time.Time `json:"start"`
	// Duration in seconds.
	Duration   float64 `json:"duration"`
	Full       bool    `json:"full"`
	Wrote      bool    `json:"wrote"`
	Changed    int     `json:"changed"`
	Deleted    int     `json:"deleted"`
	Operations int     `json:"operations,omitempty"`
	Error      string  `json:"error,omitempty"`
}

// ServiceList is one page of Services.
type ServiceList struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Items      []ServiceSummary `json:"items"`
	// Continue, when set, fetches the next page.
	Continue string `json:"continue,omitempty"`
}

// ServiceSummary is one Service in a list: its ports in every family.
type ServiceSummary struct {
	Namespace string        `json:"namespace"`
	Name      string        `json:"name"`
	Ports     []PortSummary `json:"ports"`
}

// PortID names one ServicePort of one family, in lists and in explanations.
type PortID struct {
	Family    string `json:"family"`
	Name      string `json:"name"`
	Protocol  string `json:"protocol"`
	Port      int32  `json:"port"`
	ClusterIP string `json:"clusterIP"`
	NodePort  int32  `json:"nodePort,omitempty"`
}

// PortSummary is one ServicePort of one family in a list.
type PortSummary struct {
	PortID
	// Endpoints counts every endpoint; Usable those some traffic from this node
	// may be sent to.
	Endpoints int `json:"endpoints"`
	Usable    int `json:"usable"`
}

// Service is one Service, explained.
type Service struct {
	APIVersion string        `json:"apiVersion"`
	Kind       string        `json:"kind"`
	Namespace  string        `json:"namespace"`
	Name       string        `json:"name"`
	Ports      []ServicePort `json:"ports"`
}

// ServicePort is one port of one family of a Service.
type ServicePort struct {
	PortID
	ExternalIPs              []string `json:"externalIPs,omitempty"`
	LoadBalancerIPs          []string `json:"loadBalancerIPs,omitempty"`
	LoadBalancerSourceRanges []string `json:"loadBalancerSourceRanges,omitempty"`
	InternalTrafficPolicy    string   `json:"internalTrafficPolicy"`
	ExternalTrafficPolicy    string   `json:"externalTrafficPolicy,omitempty"`
	HealthCheckNodePort      int32    `json:"healthCheckNodePort,omitempty"`
	TrafficDistribution      string   `json:"trafficDistribution,omitempty"`
	// SessionAffinitySeconds is the ClientIP affinity timeout, 0 without affinity.
	SessionAffinitySeconds int32 `json:"sessionAffinitySeconds,omitempty"`
	// Internal is how traffic to the ClusterIP is handled; External how traffic
	// to the NodePort, externalIPs and load-balancer IPs is, when there are any.
	Internal Traffic  `json:"internal"`
	External *Traffic `json:"external,omitempty"`
	// Endpoints are every endpoint of the port in this family, in the model's order.
	Endpoints []Endpoint `json:"endpoints"`
	// KernelObjects are the chains, rules, sets, maps and elements that implement
	// the port (nft text in nftables mode, iptables commands in iptables mode).
	KernelObjects []string `json:"kernelObjects"`
}

// Verdicts of a Traffic.
const (
	// VerdictForward: DNAT to one of Traffic.Endpoints.
	VerdictForward = "Forward"
	// VerdictReject: the Service has no usable endpoint anywhere; the packet is
	// rejected (ICMP unreachable or TCP reset).
	VerdictReject = "Reject"
	// VerdictDrop: the Service has usable endpoints, none for this traffic on this
	// node (a Local policy and no local endpoint); the packet is dropped.
	VerdictDrop = "Drop"
)

// Traffic is how one kind of traffic to a ServicePort is handled on this node.
type Traffic struct {
	Verdict string `json:"verdict"`
	// Selection is the endpoint selection used: "Cluster" or "Local".
	Selection string `json:"selection"`
	// Endpoints are the addresses it forwards to.
	Endpoints []string `json:"endpoints,omitempty"`
	// Masquerade (external traffic): source NAT to the node, because the endpoint
	// may be on another node (externalTrafficPolicy Cluster).
	Masquerade bool `json:"masquerade,omitempty"`
	// ShortCircuit (external traffic, externalTrafficPolicy Local): traffic from
	// this node and its pods goes to the Cluster selection instead.
	ShortCircuit bool `json:"shortCircuit,omitempty"`
}

// Endpoint is one endpoint of a ServicePort and how it is used. Each use field is
// "Used" or the reason it is not (model.Exclusion).
type Endpoint struct {
	Address     string   `json:"address"`
	NodeName    string   `json:"nodeName,omitempty"`
	Zone        string   `json:"zone,omitempty"`
	Ready       bool     `json:"ready"`
	Serving     bool     `json:"serving"`
	Terminating bool     `json:"terminating"`
	IsLocal     bool     `json:"isLocal"`
	ZoneHints   []string `json:"zoneHints,omitempty"`
	NodeHints   []string `json:"nodeHints,omitempty"`
	// ClusterSelection and LocalSelection: membership of the two selections.
	ClusterSelection string `json:"clusterSelection"`
	LocalSelection   string `json:"localSelection"`
	// Internal, External and ExternalFromNode: the traffic sources.
	Internal         string `json:"internal"`
	External         string `json:"external"`
	ExternalFromNode string `json:"externalFromNode"`
}

// Used is the value of an Endpoint use field when the endpoint is used.
const Used = "Used"
