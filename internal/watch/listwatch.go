package watch

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// listWatch lists and watches through a typed client's List and Watch, with tweak
// applied to every request's options, as client-go's generated informers do (the
// same requests, and the client's WatchList support passed on to the reflector).
func listWatch[L runtime.Object](client kubernetes.Interface, tweak func(*metav1.ListOptions),
	list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
) cache.ListerWatcher {
	if tweak == nil {
		tweak = func(*metav1.ListOptions) {}
	}
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			tweak(&opts)
			return list(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			tweak(&opts)
			return watchFn(ctx, opts)
		},
	}, client)
}

// NewNodeInformer is the Informer of this node's Node object only (field selector
// metadata.name=nodeName), converted by transform.
func NewNodeInformer(client kubernetes.Interface, nodeName string, resync time.Duration, transform cache.TransformFunc) *Informer {
	nodes := client.CoreV1().Nodes()
	return NewInformer("node", listWatch(client, NodeListOptions(nodeName), nodes.List, nodes.Watch), &v1.Node{}, resync, transform)
}

func newServiceInformer(client kubernetes.Interface, resync time.Duration, transform cache.TransformFunc) *Informer {
	services := client.CoreV1().Services(metav1.NamespaceAll)
	return NewInformer("service", listWatch(client, ServiceListOptions, services.List, services.Watch), &v1.Service{}, resync, transform)
}

func newEndpointSliceInformer(client kubernetes.Interface, resync time.Duration, transform cache.TransformFunc) *Informer {
	slices := client.DiscoveryV1().EndpointSlices(metav1.NamespaceAll)
	return NewInformer("endpointslice", listWatch(client, EndpointSliceListOptions, slices.List, slices.Watch), &discoveryv1.EndpointSlice{}, resync, transform)
}

func newServiceCIDRInformer(client kubernetes.Interface, resync time.Duration, transform cache.TransformFunc) *Informer {
	cidrs := client.NetworkingV1().ServiceCIDRs()
	return NewInformer("servicecidr", listWatch(client, nil, cidrs.List, cidrs.Watch), &networkingv1.ServiceCIDR{}, resync, transform)
}
