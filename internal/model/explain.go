package model

// Exclusion says why an endpoint is not in one of a ServicePort's endpoint
// selections; the empty Exclusion means it is in it. The values are stable: they are
// part of the state API (internal/state) and of `kube-proxy explain`'s output.
type Exclusion string

const (
	// Selected: the endpoint is in the selection.
	Selected Exclusion = ""
	// ExcludedPolicyUnused: the ServicePort never uses this selection (Local
	// selection with both traffic policies Cluster; Cluster selection with
	// internalTrafficPolicy Local and no external entry point).
	ExcludedPolicyUnused Exclusion = "PolicyUnused"
	// ExcludedNotServing: the endpoint is neither ready nor serving.
	ExcludedNotServing Exclusion = "NotReady"
	// ExcludedServingNotTerminating: serving but neither ready nor terminating, a
	// combination the API does not produce; it is used only as a terminating
	// fallback, which it is not.
	ExcludedServingNotTerminating Exclusion = "ServingButNotReady"
	// ExcludedTerminating: serving and terminating, while some ready endpoint exists
	// for this selection, so the terminating fallback is not in use.
	ExcludedTerminating Exclusion = "TerminatingWithReadyEndpoints"
	// ExcludedOtherZone: ready, but topology-aware routing is in force (every ready
	// endpoint carries zone hints and one names this node's zone) and its hints
	// name other zones only.
	ExcludedOtherZone Exclusion = "HintsForOtherZone"
	// ExcludedOtherNode: ready, but node hints are in force (every ready endpoint
	// carries them and one names this node) and its hints name other nodes only.
	ExcludedOtherNode Exclusion = "HintsForOtherNode"
	// ExcludedNotLocal: the Local selection holds only this node's endpoints.
	ExcludedNotLocal Exclusion = "NotOnThisNode"
	// ExcludedNoExternalEntry: the ServicePort has no NodePort, externalIP or
	// load-balancer VIP in this family: no external traffic reaches it.
	ExcludedNoExternalEntry Exclusion = "NotExternallyAccessible"
)

// EndpointUse is how one endpoint of one ServicePort is used on this node: whether it
// is in the Cluster-policy and Local-policy selections, and so whether it serves
// each kind of traffic.
type EndpointUse struct {
	Endpoint *Endpoint
	// Cluster and Local: membership of the two selections (CategorizeEndpoints).
	Cluster, Local Exclusion
	// Internal: traffic to the ClusterIP (the Local selection with
	// internalTrafficPolicy Local, else the Cluster one).
	Internal Exclusion
	// External: traffic from outside the node to a NodePort, externalIP or
	// load-balancer VIP (the Local selection with externalTrafficPolicy Local).
	External Exclusion
	// ExternalFromNode: traffic from this node or its pods to those addresses, which
	// with externalTrafficPolicy Local short-circuits to the Cluster selection
	// (Routing.ShortCircuitLocal), as if it had left and come back.
	ExternalFromNode Exclusion
}

// ExplainEndpoints says, for every endpoint of view's ServicePort (endpoints as
// State.Endpoints returns them, the list CategorizeEndpoints was given), in order,
// why it is or is not used for each kind of traffic. It reads the selections the
// view holds, so it cannot disagree with what the renderers program; it computes
// only the reasons, on demand, and keeps nothing.
func ExplainEndpoints(view *ServicePortView, endpoints []*Endpoint, nodeName, zone string) []EndpointUse {
	port := view.ServicePort
	inCluster := membership(view.ClusterEndpoints)
	inLocal := membership(view.LocalEndpoints)
	mode := topologyMode(endpoints, nodeName, zone)
	clusterHasReady, localHasReady := false, false
	for _, ep := range endpoints {
		clusterHasReady = clusterHasReady || ep.Ready
		localHasReady = localHasReady || (ep.Ready && ep.IsLocal)
	}

	out := make([]EndpointUse, 0, len(endpoints))
	for _, ep := range endpoints {
		use := EndpointUse{Endpoint: ep}
		switch {
		case !port.UsesClusterEndpoints():
			use.Cluster = ExcludedPolicyUnused
		case !inCluster[ep]:
			use.Cluster = conditionExclusion(ep, clusterHasReady)
			if use.Cluster == Selected {
				use.Cluster = topologyExclusion(mode)
			}
		}
		switch {
		case !port.UsesLocalEndpoints():
			use.Local = ExcludedPolicyUnused
		case !ep.IsLocal:
			use.Local = ExcludedNotLocal
		case !inLocal[ep]:
			use.Local = conditionExclusion(ep, localHasReady)
		}
		use.Internal = pick(port.InternalPolicyLocal, use)
		switch {
		case !port.ExternallyAccessible():
			use.External, use.ExternalFromNode = ExcludedNoExternalEntry, ExcludedNoExternalEntry
		case port.ExternalPolicyLocal:
			use.External = use.Local
			// Short-circuiting needs the Cluster selection to be programmed; when it
			// is empty, traffic from the node follows the Local one.
			use.ExternalFromNode = use.Local
			if len(view.ClusterEndpoints) > 0 {
				use.ExternalFromNode = use.Cluster
			}
		default:
			use.External, use.ExternalFromNode = use.Cluster, use.Cluster
		}
		out = append(out, use)
	}
	return out
}

// pick returns the Local or the Cluster membership of use.
func pick(local bool, use EndpointUse) Exclusion {
	if local {
		return use.Local
	}
	return use.Cluster
}

// conditionExclusion is why an endpoint's conditions keep it out of a selection in
// which some endpoint is ready (hasReady) or none is (the terminating fallback);
// Selected when its conditions qualify it.
func conditionExclusion(ep *Endpoint, hasReady bool) Exclusion {
	switch {
	case ep.Ready:
		return Selected
	case !ep.Serving:
		return ExcludedNotServing
	case !ep.Terminating:
		return ExcludedServingNotTerminating
	case hasReady:
		return ExcludedTerminating
	}
	return Selected
}

// topologyExclusion is why a ready endpoint is not in the Cluster selection: only
// topology can keep it out.
func topologyExclusion(mode topology) Exclusion {
	if mode == topologySameNode {
		return ExcludedOtherNode
	}
	return ExcludedOtherZone
}

func membership(list []*Endpoint) map[*Endpoint]bool {
	m := make(map[*Endpoint]bool, len(list))
	for _, ep := range list {
		m[ep] = true
	}
	return m
}
