package watch

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kproxy/kproxy/internal/model"
)

// Trimmer is the informer transform of the Services and EndpointSlices informers
// (TrimForProxy). It holds the table of shared values that the converted objects
// point to, so use one Trimmer for the informers of one Watcher.
type Trimmer struct {
	// nodeName is this node: EndpointSlices are converted for it.
	nodeName string

	mu sync.Mutex
	// places maps a nodeName and zone to the one model.Place that the cached
	// endpoints carrying them share.
	places map[model.Place]*model.Place
}

// maxInterned bounds the shared places: nodes come and go, and past the bound
// the table starts again (objects keep the places they have).
const maxInterned = 1 << 16

// NewTrimmer returns a Trimmer for the node named nodeName.
func NewTrimmer(nodeName string) *Trimmer {
	return &Trimmer{nodeName: nodeName, places: map[model.Place]*model.Place{}}
}

// TrimForProxy replaces each decoded object by what kube-proxy reads of it, before
// the object is cached. At 10,000 Services x 10 endpoints the caches are the
// largest part of the proxy's memory, and most of an EndpointSlice is per-endpoint
// bookkeeping of the EndpointSlice controller (targetRef to the Pod, hostname,
// deprecatedTopology) and of the apiserver (managedFields, owner references). What
// stays is what upstream's proxy reads, so Service semantics are unchanged:
//
//   - every object: name, namespace, uid, resourceVersion, generation, creation
//     and deletion timestamps (the informer's and the events' needs);
//   - EndpointSlice: converted to a model.EndpointSlice for this node, the
//     endpoints the model's ServicePorts point at (addresses parsed, conditions
//     resolved, one model.Place per nodeName and zone, shared by every endpoint
//     carrying them: the decoder allocates them per endpoint), with the
//     service-name label and the last-change-trigger-time annotation as fields,
//     and only the metadata listed above (model.SliceMeta, 104 bytes instead of
//     ObjectMeta's 232). The API object is dropped: the cache and the model
//     hold one copy of each endpoint, not three;
//   - Service: spec without the selector, and status (load balancer ingress);
//     labels, annotations and the selector go (the label selectors of the watch
//     are applied by the API server, and the EndpointSlice controller, not the
//     proxy, reads the selector; kubectl's last-applied-configuration annotation
//     alone can be larger than the rest).
//
// Other kinds lose their managedFields only (StripManagedFields). The informer hands
// the transform objects it has just decoded and owns, so trimming in place is safe.
// Cached objects are read-only for every consumer, as the informer contract
// requires. It may be called from several informers at once.
func (t *Trimmer) TrimForProxy(obj any) (any, error) {
	switch o := obj.(type) {
	case *discovery.EndpointSlice:
		trimMeta(&o.ObjectMeta)
		t.mu.Lock()
		defer t.mu.Unlock()
		return model.NewEndpointSlice(o, t.nodeName, t.place), nil
	case *v1.Service:
		trimMeta(&o.ObjectMeta)
		o.Labels = nil
		o.Annotations = nil
		o.Spec.Selector = nil
		o.Status.Conditions = nil
		return o, nil
	}
	return StripManagedFields(obj)
}

// place returns the shared Place equal to p. Callers hold mu.
func (t *Trimmer) place(p model.Place) *model.Place {
	if shared, ok := t.places[p]; ok {
		return shared
	}
	if len(t.places) >= maxInterned {
		t.places = map[model.Place]*model.Place{}
	}
	shared := &p
	t.places[p] = shared
	return shared
}

func trimMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	m.OwnerReferences = nil
	m.Finalizers = nil
	m.GenerateName = ""
}
