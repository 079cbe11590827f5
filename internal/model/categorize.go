package model

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// CategorizeEndpoints builds the view of one ServicePort on this node from its endpoints,
// with upstream v1.37.2's rules (pkg/proxy/topology.go):
//
//   - "Usable" means Ready; when no endpoint qualifies, Serving+Terminating endpoints are
//     used instead, decided independently for Cluster and Local traffic.
//   - Cluster endpoints honour topology hints (see topologyMode); Local endpoints ignore
//     them.
//   - ClusterEndpoints is nil exactly when the port never uses Cluster policy and
//     LocalEndpoints nil exactly when it never uses Local policy; a policy in use with
//     no usable endpoint gets an empty list. AllReachableEndpoints is never nil.
//   - HasAnyEndpoints is true when some endpoint anywhere is usable.
//
// spec.trafficDistribution itself is not consulted: as upstream, kube-proxy follows the
// hints that the EndpointSlice controller derives from it (PreferClose and
// PreferSameZone give zone hints, PreferSameNode gives node and zone hints).
// endpoints must be sorted (as EndpointsForService returns them); the lists in the view
// keep that order and share the *Endpoint values.
func CategorizeEndpoints(endpoints []*Endpoint, port *ServicePort, nodeName, zone string) *ServicePortView {
	view := &ServicePortView{ServicePort: port}
	if len(endpoints) == 0 {
		// Upstream returns nil lists here; we keep the ServicePortView contract (nil
		// means "policy unused") with empty lists for the policies in use.
		if port.UsesClusterEndpoints() {
			view.ClusterEndpoints = []*Endpoint{}
		}
		if port.UsesLocalEndpoints() {
			view.LocalEndpoints = []*Endpoint{}
		}
		view.AllReachableEndpoints = []*Endpoint{}
		return view
	}

	mode := topologyNone
	if port.UsesClusterEndpoints() {
		mode = topologyMode(endpoints, nodeName, zone)
		view.ClusterEndpoints = filterEndpoints(endpoints, func(ep *Endpoint) bool {
			return ep.Ready && availableForTopology(ep, mode, nodeName, zone)
		})
		// Topology was already ignored if it left no ready endpoint, so an empty
		// list here means nothing is ready anywhere: fall back to terminating ones.
		if len(view.ClusterEndpoints) == 0 {
			view.ClusterEndpoints = filterEndpoints(endpoints, servingTerminating)
		}
		view.HasAnyEndpoints = len(view.ClusterEndpoints) > 0
	}

	if !port.UsesLocalEndpoints() {
		view.AllReachableEndpoints = view.ClusterEndpoints
		return view
	}

	var localReady, localServingTerminating bool
	for _, ep := range endpoints {
		switch {
		case ep.Ready:
			view.HasAnyEndpoints = true
			localReady = localReady || ep.IsLocal
		case servingTerminating(ep):
			view.HasAnyEndpoints = true
			localServingTerminating = localServingTerminating || ep.IsLocal
		}
	}
	usingTerminating := false
	switch {
	case localReady:
		view.LocalEndpoints = filterEndpoints(endpoints, func(ep *Endpoint) bool { return ep.IsLocal && ep.Ready })
	case localServingTerminating:
		usingTerminating = true
		view.LocalEndpoints = filterEndpoints(endpoints, func(ep *Endpoint) bool { return ep.IsLocal && servingTerminating(ep) })
	default:
		// Upstream leaves the list nil here; a nil list would read as "Local policy
		// unused", so use an empty one. (Both have length 0.)
		view.LocalEndpoints = []*Endpoint{}
	}

	if !port.UsesClusterEndpoints() {
		view.AllReachableEndpoints = view.LocalEndpoints
		return view
	}
	if mode == topologyNone && !usingTerminating {
		// Cluster holds every ready endpoint and Local only ready ones: a superset.
		view.AllReachableEndpoints = view.ClusterEndpoints
		return view
	}
	// Cluster may hold remote endpoints that Local lacks and Local may hold terminating
	// or topologically filtered local ones that Cluster lacks: merge, keeping order.
	reachable := make(map[*Endpoint]struct{}, len(view.ClusterEndpoints)+len(view.LocalEndpoints))
	for _, ep := range view.ClusterEndpoints {
		reachable[ep] = struct{}{}
	}
	for _, ep := range view.LocalEndpoints {
		reachable[ep] = struct{}{}
	}
	view.AllReachableEndpoints = filterEndpoints(endpoints, func(ep *Endpoint) bool {
		_, ok := reachable[ep]
		return ok
	})
	return view
}

type topology int

const (
	topologyNone topology = iota
	topologySameZone
	topologySameNode
)

// topologyMode decides from the hints of the ready endpoints which topology filter
// applies (upstream's topologyModeFromHints with PreferSameTrafficDistribution, GA and
// locked on in v1.37):
//   - every ready endpoint has node hints and one is hinted for this node: same node;
//   - else every ready endpoint has zone hints and one is hinted for this zone: same zone;
//   - else none.
func topologyMode(endpoints []*Endpoint, nodeName, zone string) topology {
	hasReady := false
	allNodeHints, forNode := true, false
	allZoneHints, forZone := true, false
	for _, ep := range endpoints {
		if !ep.Ready {
			continue
		}
		hasReady = true
		if len(ep.NodeHints()) == 0 {
			allNodeHints = false
		} else if slices.Contains(ep.NodeHints(), nodeName) {
			forNode = true
		}
		if len(ep.ZoneHints()) == 0 {
			allZoneHints = false
		} else if slices.Contains(ep.ZoneHints(), zone) {
			forZone = true
		}
	}
	switch {
	case !hasReady:
		return topologyNone
	case allNodeHints && forNode:
		return topologySameNode
	case allZoneHints && forZone:
		return topologySameZone
	}
	return topologyNone
}

func availableForTopology(ep *Endpoint, mode topology, nodeName, zone string) bool {
	switch mode {
	case topologySameNode:
		return slices.Contains(ep.NodeHints(), nodeName)
	case topologySameZone:
		return slices.Contains(ep.ZoneHints(), zone)
	}
	return true
}

func servingTerminating(ep *Endpoint) bool { return ep.Serving && ep.Terminating }

// filterEndpoints returns the endpoints that keep accepts, in order. When it
// accepts them all (the common case) the result is endpoints itself, clipped so
// that an append cannot write into it: views share their lists with the model,
// and both are read-only.
func filterEndpoints(endpoints []*Endpoint, keep func(*Endpoint) bool) []*Endpoint {
	i := 0
	for i < len(endpoints) && keep(endpoints[i]) {
		i++
	}
	if i == len(endpoints) {
		return endpoints[:i:i]
	}
	out := make([]*Endpoint, i, len(endpoints))
	copy(out, endpoints[:i])
	for _, ep := range endpoints[i+1:] {
		if keep(ep) {
			out = append(out, ep)
		}
	}
	return out
}

// TopologyZone extracts this node's zone from its labels.
func TopologyZone(labels map[string]string) string { return labels[v1.LabelTopologyZone] }
