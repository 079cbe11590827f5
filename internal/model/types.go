package model

import (
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ServicePortName names one port of one Service: the unit that every dataplane programs.
type ServicePortName struct {
	types.NamespacedName
	// Port is the name of the port in the Service spec ("" for an unnamed single port).
	Port     string
	Protocol v1.Protocol
}

// String renders the name as upstream does: "namespace/name:port".
func (n ServicePortName) String() string {
	return fmt.Sprintf("%s%s", n.NamespacedName.String(), portSuffix(n.Port))
}

func portSuffix(port string) string {
	if port == "" {
		return ""
	}
	return ":" + port
}

// ServicePort is one port of one Service in one IP family, reduced to what a proxy
// programs. It is immutable once built: a change to the Service yields a new value.
type ServicePort struct {
	Name      ServicePortName
	ClusterIP netip.Addr
	Port      int32
	Protocol  v1.Protocol
	// NodePort is 0 when the Service has none.
	NodePort int32
	// TargetPortName is the name of spec.ports[].targetPort when it is a name, which
	// endpoints resolve per EndpointSlice; informational only.
	TargetPortName string

	// ExternalIPs, LoadBalancerVIPs and LoadBalancerSourceRanges hold only this
	// family's addresses. LoadBalancerVIPs leaves out ingress points with ipMode Proxy.
	// An all-zero source range ("0.0.0.0/0") means "allow any" and is dropped, so an
	// empty LoadBalancerSourceRanges means no firewall.
	ExternalIPs              []netip.Addr
	LoadBalancerVIPs         []netip.Addr
	LoadBalancerSourceRanges []netip.Prefix

	// StickyMaxAgeSeconds is non-zero exactly when sessionAffinity is ClientIP.
	StickyMaxAgeSeconds int32

	ExternalPolicyLocal bool
	InternalPolicyLocal bool
	// HealthCheckNodePort is set when externalTrafficPolicy is Local on a
	// LoadBalancer Service.
	HealthCheckNodePort int32
	// TrafficDistribution is spec.trafficDistribution ("" when unset).
	TrafficDistribution string
}

// SessionAffinity reports whether ClientIP session affinity is on.
func (p *ServicePort) SessionAffinity() bool { return p.StickyMaxAgeSeconds > 0 }

// ExternallyAccessible reports whether traffic can reach the Service from outside the
// cluster: through a NodePort, an externalIP or a load balancer VIP.
func (p *ServicePort) ExternallyAccessible() bool {
	return p.NodePort != 0 || len(p.LoadBalancerVIPs) != 0 || len(p.ExternalIPs) != 0
}

// UsesClusterEndpoints reports whether some traffic to the Service is routed with the
// Cluster policy (to endpoints anywhere in the cluster).
func (p *ServicePort) UsesClusterEndpoints() bool {
	// The service port uses Cluster endpoints if the internal traffic policy is
	// "Cluster", or if it accepts external traffic at all. (Even if the external
	// traffic policy is "Local", we need Cluster endpoints to implement short circuiting.)
	return !p.InternalPolicyLocal || p.ExternallyAccessible()
}

// UsesLocalEndpoints reports whether some traffic to the Service is routed with the
// Local policy (only to endpoints on this node).
func (p *ServicePort) UsesLocalEndpoints() bool {
	return p.InternalPolicyLocal || (p.ExternalPolicyLocal && p.ExternallyAccessible())
}

// Endpoint is one backend of one ServicePort in one IP family.
type Endpoint struct {
	IP   netip.Addr
	Port int32

	// Conditions as in the EndpointSlice. A nil condition in the API is mapped as the
	// API documents it: ready nil means ready; serving nil means serving;
	// terminating nil means false.
	Ready       bool
	Serving     bool
	Terminating bool

	// IsLocal is NodeName() == this node. (It is beside the other flags: the field
	// order keeps the struct, of which there is one per endpoint and port, small.)
	IsLocal bool

	// Place locates the endpoint: nil when the EndpointSlice gave neither node
	// name nor zone. Endpoints of one node and zone share one Place (the
	// watcher's converted slices share it across slices): two inline strings
	// were 32 of the 72 bytes of an Endpoint, of which there is one per endpoint
	// and port (300,000 at 30,000 Services x 10 endpoints).
	Place *Place

	// Hints are the EndpointSlice's topology hints; nil when it gave none. (A
	// pointer: there is one Endpoint per endpoint and port, and two inline lists
	// would make it half as large again.)
	Hints *EndpointHints
}

// Place is where an endpoint runs: its nodeName and zone ("" when not given).
// Places are shared: never modify one.
type Place struct {
	NodeName, Zone string
}

// NodeName is the endpoint's node ("" when not given).
func (e *Endpoint) NodeName() string {
	if e.Place == nil {
		return ""
	}
	return e.Place.NodeName
}

// Zone is the endpoint's zone ("" when not given).
func (e *Endpoint) Zone() string {
	if e.Place == nil {
		return ""
	}
	return e.Place.Zone
}

// EndpointHints are an endpoint's topology hints.
type EndpointHints struct {
	// Zones and Nodes are the forZones and forNodes hints, without duplicates; nil
	// means no hint of that kind.
	Zones, Nodes []string
}

// ZoneHints returns the endpoint's forZones hints (nil when none).
func (e *Endpoint) ZoneHints() []string {
	if e.Hints == nil {
		return nil
	}
	return e.Hints.Zones
}

// NodeHints returns the endpoint's forNodes hints (nil when none).
func (e *Endpoint) NodeHints() []string {
	if e.Hints == nil {
		return nil
	}
	return e.Hints.Nodes
}

// AddrPort is the endpoint's address and port.
func (e *Endpoint) AddrPort() netip.AddrPort { return netip.AddrPortFrom(e.IP, uint16(e.Port)) }

// String renders the endpoint as "ip:port" ("[ip]:port" for IPv6).
func (e *Endpoint) String() string { return e.AddrPort().String() }

// ServicePortView is everything a renderer needs to program one ServicePort on this
// node: the port and its endpoints, already categorized by traffic policy and topology.
type ServicePortView struct {
	*ServicePort

	// ClusterEndpoints are the usable endpoints for Cluster-policy traffic (after
	// topology filtering and the terminating fallback); nil when the port never uses
	// Cluster policy.
	ClusterEndpoints []*Endpoint
	// LocalEndpoints are the usable endpoints on this node for Local-policy traffic;
	// nil when the port never uses Local policy.
	LocalEndpoints []*Endpoint
	// AllReachableEndpoints is the union of the two lists above: every endpoint some
	// traffic from this node may be sent to.
	AllReachableEndpoints []*Endpoint
	// HasAnyEndpoints reports whether the Service has usable endpoints anywhere in the
	// cluster, even when none is usable from this node.
	HasAnyEndpoints bool
}
