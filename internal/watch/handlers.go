package watch

import (
	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/model"
)

// ServiceHandler receives Service changes.
type ServiceHandler interface {
	OnServiceAdd(service *v1.Service)
	OnServiceUpdate(oldService, service *v1.Service)
	OnServiceDelete(service *v1.Service)
	// OnServiceSynced is called once, after the handlers have seen every Service
	// of the initial list.
	OnServiceSynced()
}

// EndpointSliceHandler receives EndpointSlice changes, as the informer cache holds
// them: converted for this node (see Trimmer).
type EndpointSliceHandler interface {
	OnEndpointSliceAdd(endpointSlice *model.EndpointSlice)
	OnEndpointSliceUpdate(oldEndpointSlice, newEndpointSlice *model.EndpointSlice)
	OnEndpointSliceDelete(endpointSlice *model.EndpointSlice)
	// OnEndpointSlicesSynced is called once, after the initial list.
	OnEndpointSlicesSynced()
}

// NodeHandler receives changes of this node's Node object.
type NodeHandler interface {
	// OnNodeChange is called on creation and on every update.
	OnNodeChange(node *v1.Node)
	OnNodeDelete(node *v1.Node)
	// OnNodeSynced is called once, after the initial list.
	OnNodeSynced()
}

// NodeTopologyHandler receives the proxy-relevant topology labels of this node
// (currently topology.kubernetes.io/zone) whenever they change; as upstream, a
// node without any of them reports nothing until one appears.
type NodeTopologyHandler interface {
	OnTopologyChange(topologyLabels map[string]string)
}

// ServiceCIDRHandler receives the complete, sorted set of CIDRs of all ServiceCIDR
// objects whenever any of them changes, and once after the initial list.
type ServiceCIDRHandler interface {
	OnServiceCIDRsChanged(cidrs []string)
}
