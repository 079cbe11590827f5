package bench

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kproxy/kproxy/test/lab"
)

// Adopt makes the first n Services of the API server (bench-00000 ...), with their
// EndpointSlices, the loader's Svcs, as they are stored now: the loader of the run in
// the VM takes the objects the host loaded, and the host's loader reads the churn
// Services back after the VM's change series moved their endpoints. A churn Service's
// Pod is the backend whose address its single endpoint has, so the VM's lab must have
// the host's pod layout (LabOptions). It returns how long the reading took.
func (ld *Loader) Adopt(ctx context.Context, n int) (time.Duration, error) {
	start := time.Now()
	client := ld.Lab.Client
	svcs, err := client.CoreV1().Services(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list services: %w", err)
	}
	slices, err := client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list endpoint slices: %w", err)
	}
	bySvc := map[string]*discoveryv1.EndpointSlice{}
	for i := range slices.Items {
		sl := &slices.Items[i]
		bySvc[sl.Labels[discoveryv1.LabelServiceName]] = sl
	}
	byAddr := map[string]*lab.Pod{}
	for _, p := range ld.Backends {
		byAddr[p.IPs.V4.String()] = p
	}
	out := make([]*Svc, n)
	for i := range svcs.Items {
		obj := &svcs.Items[i]
		var idx int
		if _, err := fmt.Sscanf(obj.Name, "bench-%05d", &idx); err != nil || idx >= n || obj.Name != fmt.Sprintf("bench-%05d", idx) {
			continue
		}
		ip, err := netip.ParseAddr(obj.Spec.ClusterIP)
		if err != nil {
			return 0, fmt.Errorf("service %s: cluster IP %q: %w", obj.Name, obj.Spec.ClusterIP, err)
		}
		s := &Svc{Index: idx, Name: obj.Name, ClusterIP: ip, Object: obj, Slice: bySvc[obj.Name]}
		if s.Slice == nil {
			return 0, fmt.Errorf("service %s has no EndpointSlice", obj.Name)
		}
		if IsChurn(idx) {
			if len(s.Slice.Endpoints) != 1 || len(s.Slice.Endpoints[0].Addresses) == 0 || byAddr[s.Slice.Endpoints[0].Addresses[0]] == nil {
				return 0, fmt.Errorf("churn service %s: its endpoint is not one of the lab's pods (%v)", obj.Name, s.Slice.Endpoints)
			}
			s.Pod = byAddr[s.Slice.Endpoints[0].Addresses[0]]
		}
		out[idx] = s
	}
	for i, s := range out {
		if s == nil {
			return 0, fmt.Errorf("service bench-%05d of %d is not in the API server", i, n)
		}
	}
	ld.mu.Lock()
	ld.Svcs = append(out, ld.Svcs[min(n, len(ld.Svcs)):]...)
	ld.mu.Unlock()
	return time.Since(start), nil
}
