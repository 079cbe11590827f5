package watch

import (
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TrimForProxy is the informer transform of the Services and EndpointSlices
// informers: it drops from each decoded object what no part of kube-proxy reads,
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
// Other kinds lose their managedFields only (StripManagedFields). The informer hands
// the transform objects it has just decoded and owns, so trimming in place is safe.
func TrimForProxy(obj any) (any, error) {
	switch o := obj.(type) {
	case *discovery.EndpointSlice:
		trimMeta(&o.ObjectMeta)
		o.Labels = keepOnly(o.Labels, discovery.LabelServiceName)
		o.Annotations = keepOnly(o.Annotations, v1.EndpointsLastChangeTriggerTime)
		for i := range o.Endpoints {
			ep := &o.Endpoints[i]
			ep.TargetRef = nil
			ep.Hostname = nil
			ep.DeprecatedTopology = nil
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

func trimMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	m.OwnerReferences = nil
	m.Finalizers = nil
	m.GenerateName = ""
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
