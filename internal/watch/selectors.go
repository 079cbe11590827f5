package watch

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// LabelServiceProxyName marks a Service as handled by another proxy; kube-proxy
// ignores such Services.
const LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"

// notExists renders the label selector "!key" (the key has no value).
func notExists(key string) string {
	return "!" + key
}

// ServiceListOptions selects the Services kube-proxy proxies: not claimed by another
// proxy, and not headless (headless Services are served by DNS only).
func ServiceListOptions(options *metav1.ListOptions) {
	options.LabelSelector = notExists(LabelServiceProxyName)
	options.FieldSelector = fields.OneTermNotEqualSelector("spec.clusterIP", v1.ClusterIPNone).String()
}

// EndpointSliceListOptions selects the EndpointSlices of non-headless Services.
func EndpointSliceListOptions(options *metav1.ListOptions) {
	options.LabelSelector = notExists(v1.IsHeadlessService)
}

// NodeListOptions selects the one Node named nodeName.
func NodeListOptions(nodeName string) func(*metav1.ListOptions) {
	return func(options *metav1.ListOptions) {
		options.FieldSelector = fields.OneTermEqualSelector("metadata.name", nodeName).String()
	}
}

// StripManagedFields is the informer transform that drops metadata.managedFields,
// which kube-proxy never reads, from every cached object.
func StripManagedFields(obj any) (any, error) {
	if accessor, err := meta.Accessor(obj); err == nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}
