package lab

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"
)

// CreateNodes registers node1 and node2 (with status) as a kubelet would.
func (l *Lab) CreateNodes(ctx context.Context) error {
	for _, n := range l.Nodes() {
		want := NodeObject(n.NodePlan)
		got, err := l.Client.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// Registered before, by another lab on the same (external) API server:
			// take it over, as a kubelet re-registering its node.
			if got, err = l.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err == nil {
				got.Labels, got.Annotations, got.Spec = want.Labels, want.Annotations, want.Spec
				got, err = l.Client.CoreV1().Nodes().Update(ctx, got, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			return fmt.Errorf("create node %s: %w", n.Name, err)
		}
		got.Status = want.Status
		if _, err := l.Client.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("node %s status: %w", n.Name, err)
		}
	}
	return nil
}

// CreateService creates svc (in "default" when it names no namespace) and returns the
// stored object, with its allocated cluster IPs and UID.
func (l *Lab) CreateService(ctx context.Context, svc *v1.Service) (*v1.Service, error) {
	svc = svc.DeepCopy()
	if svc.Namespace == "" {
		svc.Namespace = metav1.NamespaceDefault
	}
	out, err := l.Client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return out, nil
}

// UpdateService applies mutate to the stored Service name (in "default") and
// writes it back, again on a conflict, returning the stored result.
func (l *Lab) UpdateService(ctx context.Context, name string, mutate func(*v1.Service)) (*v1.Service, error) {
	var out *v1.Service
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc, err := l.Client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(svc)
		out, err = l.Client.CoreV1().Services(metav1.NamespaceDefault).Update(ctx, svc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update service %s/%s: %w", metav1.NamespaceDefault, name, err)
	}
	return out, nil
}

// DeleteService deletes svc and its EndpointSlices: the lab runs no garbage
// collector, so the slices would outlive the Service otherwise.
func (l *Lab) DeleteService(ctx context.Context, svc *v1.Service) error {
	err := l.Client.CoreV1().Services(svc.Namespace).Delete(ctx, svc.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	err = l.Client.DiscoveryV1().EndpointSlices(svc.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
	if err != nil {
		return fmt.Errorf("delete endpoint slices of %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

// SetEndpoints makes svc's EndpointSlices hold exactly endpoints, as the EndpointSlice
// controller would: slices are created or updated in place (trigger time now) and
// slices no longer needed are deleted. svc must be the stored Service (with its UID).
// ports defaults to PortsFromService(svc).
func (l *Lab) SetEndpoints(ctx context.Context, svc *v1.Service, endpoints []Endpoint, ports []discoveryv1.EndpointPort) ([]*discoveryv1.EndpointSlice, error) {
	if ports == nil {
		ports = PortsFromService(svc)
	}
	api := l.Client.DiscoveryV1().EndpointSlices(svc.Namespace)
	existing, err := api.List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{
		discoveryv1.LabelServiceName: svc.Name,
		discoveryv1.LabelManagedBy:   ControllerName,
	}).String()})
	if err != nil {
		return nil, fmt.Errorf("list slices of %s: %w", svc.Name, err)
	}
	current := map[string]*discoveryv1.EndpointSlice{}
	for i := range existing.Items {
		current[existing.Items[i].Name] = &existing.Items[i]
	}
	var out []*discoveryv1.EndpointSlice
	for _, want := range BuildEndpointSlices(svc, endpoints, ports, SliceOptions{TriggerTime: time.Now()}) {
		var got *discoveryv1.EndpointSlice
		if cur, ok := current[want.Name]; ok {
			want.ResourceVersion = cur.ResourceVersion
			got, err = api.Update(ctx, want, metav1.UpdateOptions{})
			delete(current, want.Name)
		} else {
			got, err = api.Create(ctx, want, metav1.CreateOptions{})
		}
		if err != nil {
			return nil, fmt.Errorf("write slice %s: %w", want.Name, err)
		}
		out = append(out, got)
	}
	for name := range current {
		if err := api.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete slice %s: %w", name, err)
		}
	}
	return out, nil
}

// PodEndpoints returns the given pods as ready endpoints.
func PodEndpoints(pods ...*Pod) []Endpoint {
	out := make([]Endpoint, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Endpoint())
	}
	return out
}
