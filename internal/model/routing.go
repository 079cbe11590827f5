package model

// Routing is how traffic to one ServicePort is dispatched on this node, decided once
// here and read by every mode's renderer: which endpoint selections exist (the
// Cluster-policy one, over endpoints anywhere, and the Local-policy one, over this
// node's), which of them serves internal traffic (to the ClusterIP) and external
// traffic (to the NodePort, externalIPs and load-balancer VIPs), and what becomes of
// traffic that no selection serves. It is upstream's per-ServicePort reasoning in
// syncProxyRules (usesClusterPolicyChain, internalPolicyChain, hasInternalEndpoints,
// usesExternalChain, ...), with one difference both renderers relied on before it
// moved here: a selection is only named as serving traffic when it is programmed
// (upstream relies on the model never giving a Service endpoints without Cluster
// endpoints).
type Routing struct {
	// ClusterSelection and LocalSelection report whether the Cluster-policy and the
	// Local-policy endpoint selections are programmed: the port uses that policy
	// and has usable endpoints for it.
	ClusterSelection, LocalSelection bool
	// InternalLocal and ExternalLocal report whether internal and external traffic
	// use the Local-policy selection (else the Cluster-policy one).
	InternalLocal, ExternalLocal bool
	// InternalServed and ExternalServed report whether the selection internal and
	// external traffic use is programmed and the Service has endpoints; traffic
	// that is not served is rejected or dropped (RejectUnserved).
	InternalServed, ExternalServed bool
	// ExternalEntry reports whether the external entry point (upstream's
	// external-/KUBE-EXT- chain) exists: whenever the Service is reachable from
	// outside and has endpoints anywhere, even with none usable for external
	// traffic, because it still masquerades or short-circuits traffic from local
	// pods and from the node.
	ExternalEntry bool
	// ShortCircuitLocal reports whether the external entry point sends traffic from
	// local pods and from the node itself to the Cluster-policy selection,
	// bypassing external policy Local (as if it went out to the load balancer and
	// came back). MasqueradeExternal reports whether it masquerades external
	// traffic (external policy Cluster: endpoints may be on other nodes, so replies
	// must come back here).
	ShortCircuitLocal, MasqueradeExternal bool
	// RejectUnserved reports whether unserved traffic is rejected (the Service has
	// no usable endpoint anywhere) rather than dropped (it has some, none usable
	// for that traffic on this node).
	RejectUnserved bool
}

// DecideRouting decides the Routing of sp given whether the Service has usable
// endpoints anywhere (ServicePortView.HasAnyEndpoints) and how many usable endpoints
// of the renderer's family its Cluster-policy and Local-policy lists hold.
func DecideRouting(sp *ServicePort, hasAnyEndpoints bool, clusterEndpoints, localEndpoints int) Routing {
	r := Routing{
		ClusterSelection:   clusterEndpoints > 0 && sp.UsesClusterEndpoints(),
		LocalSelection:     localEndpoints > 0 && sp.UsesLocalEndpoints(),
		InternalLocal:      sp.InternalPolicyLocal,
		ExternalLocal:      sp.ExternalPolicyLocal,
		ExternalEntry:      hasAnyEndpoints && sp.ExternallyAccessible(),
		MasqueradeExternal: !sp.ExternalPolicyLocal,
		RejectUnserved:     !hasAnyEndpoints,
	}
	r.InternalServed = hasAnyEndpoints && r.selection(r.InternalLocal)
	r.ExternalServed = hasAnyEndpoints && r.selection(r.ExternalLocal)
	r.ShortCircuitLocal = sp.ExternalPolicyLocal && r.ClusterSelection
	return r
}

// selection reports whether the Local-policy (local) or Cluster-policy selection is
// programmed.
func (r *Routing) selection(local bool) bool {
	if local {
		return r.LocalSelection
	}
	return r.ClusterSelection
}
