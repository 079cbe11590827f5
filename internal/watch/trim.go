package watch

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Trimmer is the informer transform of the Services and EndpointSlices informers
// (TrimForProxy). It holds the table of shared values that the trimmed objects point
// to, so use one Trimmer for the informers of one Watcher.
type Trimmer struct {
	// yes and no are the shared endpoint condition values.
	yes, no bool

	mu sync.Mutex
	// interned maps a nodeName or zone to the one *string that the cached
	// endpoints carrying it share.
	interned map[string]*string
}

// maxInterned bounds the interned strings: nodes come and go, and past the bound
// the table starts again (objects keep the pointers they have).
const maxInterned = 1 << 16

// NewTrimmer returns a Trimmer.
func NewTrimmer() *Trimmer {
	return &Trimmer{yes: true, interned: map[string]*string{}}
}

// TrimForProxy drops from each decoded object what no part of kube-proxy reads,
// before the object is cached. At 10,000 Services x 10 endpoints the caches are
// the largest part of the proxy's memory, and most of an EndpointSlice is
// per-endpoint bookkeeping of the EndpointSlice controller (targetRef to the Pod,
// hostname, deprecatedTopology) and of the apiserver (managedFields, owner
// references). What stays is what upstream's proxy reads, so Service semantics are
// unchanged:
//
//   - every object: name, namespace, uid, resourceVersion, generation, creation
//     and deletion timestamps (the informer's and the events' needs);
//   - EndpointSlice: the kubernetes.io/service-name label, the
//     endpoints.kubernetes.io/last-change-trigger-time annotation, addressType,
//     ports, and per endpoint addresses, conditions, nodeName, zone and hints;
//   - Service: spec and status (load balancer ingress); labels and annotations go
//     (the label selectors are applied by the API server; kubectl's
//     last-applied-configuration annotation alone can be larger than the rest).
//
// The endpoints' condition pointers and their nodeName and zone pointers are made
// to share one value per distinct value (the decoder allocates them per endpoint:
// 5 MB at 100,000 endpoints), and the endpoint list is reallocated to its length:
// the decoder grows it by appending, so 10 endpoints (96 bytes each) sit in an
// array of 16, 7.5 MB of the cache at 10,000 slices of 10. Cached objects are read-only for every consumer, as
// the informer contract requires, so sharing is invisible.
//
// Other kinds lose their managedFields only (StripManagedFields). The informer hands
// the transform objects it has just decoded and owns, so trimming in place is safe.
// It may be called from several informers at once.
func (t *Trimmer) TrimForProxy(obj any) (any, error) {
	switch o := obj.(type) {
	case *discovery.EndpointSlice:
		trimMeta(&o.ObjectMeta)
		o.Labels = keepOnly(o.Labels, discovery.LabelServiceName)
		o.Annotations = keepOnly(o.Annotations, v1.EndpointsLastChangeTriggerTime)
		o.Endpoints = exactSize(o.Endpoints)
		t.mu.Lock()
		defer t.mu.Unlock()
		for i := range o.Endpoints {
			ep := &o.Endpoints[i]
			ep.TargetRef = nil
			ep.Hostname = nil
			ep.DeprecatedTopology = nil
			ep.Conditions.Ready = t.shareBool(ep.Conditions.Ready)
			ep.Conditions.Serving = t.shareBool(ep.Conditions.Serving)
			ep.Conditions.Terminating = t.shareBool(ep.Conditions.Terminating)
			ep.NodeName = t.intern(ep.NodeName)
			ep.Zone = t.intern(ep.Zone)
		}
		return o, nil
	case *v1.Service:
		trimMeta(&o.ObjectMeta)
		o.Labels = nil
		o.Annotations = nil
		o.Status.Conditions = nil
		return o, nil
	}
	return StripManagedFields(obj)
}

func (t *Trimmer) shareBool(b *bool) *bool {
	switch {
	case b == nil:
		return nil
	case *b:
		return &t.yes
	default:
		return &t.no
	}
}

// intern returns the shared pointer for *s. Callers hold mu.
func (t *Trimmer) intern(s *string) *string {
	if s == nil {
		return nil
	}
	if p, ok := t.interned[*s]; ok {
		return p
	}
	if len(t.interned) >= maxInterned {
		t.interned = map[string]*string{}
	}
	t.interned[*s] = s
	return s
}

func trimMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	m.OwnerReferences = nil
	m.Finalizers = nil
	m.GenerateName = ""
}

// exactSize returns s in an array of its length (s itself when it already is).
func exactSize[S ~[]E, E any](s S) S {
	if cap(s) == len(s) {
		return s
	}
	out := make(S, len(s))
	copy(out, s)
	return out
}

// keepOnly returns the map with only key (nil when key is absent).
func keepOnly(m map[string]string, key string) map[string]string {
	v, ok := m[key]
	if !ok {
		return nil
	}
	if len(m) == 1 {
		return m
	}
	return map[string]string{key: v}
}
