package watch

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func fullMeta(labels, annotations map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: "web-abc", Namespace: "ns", UID: "u1", ResourceVersion: "42", GenerateName: "web-",
		Labels: labels, Annotations: annotations,
		OwnerReferences: []metav1.OwnerReference{{Kind: "Service", Name: "web"}},
		Finalizers:      []string{"x"},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "m"}},
	}
}

func TestTrimForProxyEndpointSlice(t *testing.T) {
	slice := &discovery.EndpointSlice{
		ObjectMeta: fullMeta(
			map[string]string{discovery.LabelServiceName: "web", discovery.LabelManagedBy: "endpointslice-controller.k8s.io"},
			map[string]string{v1.EndpointsLastChangeTriggerTime: "2030-01-01T00:00:00Z", "other": "x"}),
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		Endpoints: []discovery.Endpoint{{
			Addresses:          []string{"10.0.0.1"},
			Conditions:         discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			Hostname:           ptr.To("pod-1"),
			TargetRef:          &v1.ObjectReference{Kind: "Pod", Name: "pod-1"},
			DeprecatedTopology: map[string]string{"a": "b"},
			NodeName:           ptr.To("node-a"),
			Zone:               ptr.To("z1"),
			Hints:              &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "z1"}}},
		}},
	}
	got, err := NewTrimmer().TrimForProxy(slice)
	if err != nil {
		t.Fatal(err)
	}
	want := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-abc", Namespace: "ns", UID: "u1", ResourceVersion: "42",
			Labels:      map[string]string{discovery.LabelServiceName: "web"},
			Annotations: map[string]string{v1.EndpointsLastChangeTriggerTime: "2030-01-01T00:00:00Z"},
		},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		Endpoints: []discovery.Endpoint{{
			Addresses:  []string{"10.0.0.1"},
			Conditions: discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To("node-a"),
			Zone:       ptr.To("z1"),
			Hints:      &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "z1"}}},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trimmed EndpointSlice (-want +got):\n%s", diff)
	}
}

func TestTrimForProxyService(t *testing.T) {
	svc := &v1.Service{
		ObjectMeta: fullMeta(map[string]string{"app": "web"}, map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"}),
		Spec:       v1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []v1.ServicePort{{Port: 80}}, Type: v1.ServiceTypeLoadBalancer},
		Status: v1.ServiceStatus{
			LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "192.0.2.10"}}},
			Conditions:   []metav1.Condition{{Type: "x"}},
		},
	}
	got, err := NewTrimmer().TrimForProxy(svc)
	if err != nil {
		t.Fatal(err)
	}
	want := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "ns", UID: "u1", ResourceVersion: "42"},
		Spec:       svc.Spec,
		Status:     v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "192.0.2.10"}}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trimmed Service (-want +got):\n%s", diff)
	}
}

func TestTrimForProxyOtherKinds(t *testing.T) {
	node := &v1.Node{ObjectMeta: fullMeta(map[string]string{v1.LabelTopologyZone: "z1"}, map[string]string{"a": "b"})}
	got, err := NewTrimmer().TrimForProxy(node)
	if err != nil {
		t.Fatal(err)
	}
	n := got.(*v1.Node)
	if n.ManagedFields != nil || n.Labels[v1.LabelTopologyZone] != "z1" || n.Annotations["a"] != "b" || len(n.OwnerReferences) != 1 {
		t.Errorf("a Node must only lose its managedFields: %+v", n.ObjectMeta)
	}
}

// Endpoints of different slices share their condition values and their nodeName and
// zone pointers; the values stay what the API said.
func TestTrimForProxySharesEndpointValues(t *testing.T) {
	trimmer := NewTrimmer()
	slice := func(name, node string, ready bool) *discovery.EndpointSlice {
		return &discovery.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Endpoints: []discovery.Endpoint{{
				Addresses:  []string{"10.0.0.1"},
				Conditions: discovery.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(true)},
				NodeName:   ptr.To(node),
				Zone:       ptr.To("z1"),
			}},
		}
	}
	trim := func(s *discovery.EndpointSlice) discovery.Endpoint {
		t.Helper()
		got, err := trimmer.TrimForProxy(s)
		if err != nil {
			t.Fatal(err)
		}
		return got.(*discovery.EndpointSlice).Endpoints[0]
	}
	a, b, c := trim(slice("a", "node-a", true)), trim(slice("b", "node-a", true)), trim(slice("c", "node-b", false))
	if a.NodeName != b.NodeName || a.Zone != b.Zone || a.Zone != c.Zone || a.Conditions.Ready != b.Conditions.Ready ||
		a.Conditions.Ready != a.Conditions.Serving {
		t.Errorf("equal values are not shared: %p %p, %p %p %p, %p %p", a.NodeName, b.NodeName, a.Zone, b.Zone, c.Zone, a.Conditions.Ready, b.Conditions.Ready)
	}
	if *c.NodeName != "node-b" || *a.NodeName != "node-a" || *c.Conditions.Ready || !*a.Conditions.Ready || c.Conditions.Terminating != nil {
		t.Errorf("values changed: %s %s %v %v %v", *a.NodeName, *c.NodeName, *a.Conditions.Ready, *c.Conditions.Ready, c.Conditions.Terminating)
	}
}

// The decoder grows the endpoint list by appending; the cached slice keeps an array
// of its length only, with the same endpoints.
func TestTrimForProxyReallocatesEndpointsToLength(t *testing.T) {
	eps := make([]discovery.Endpoint, 0, 16)
	for i := range 10 {
		eps = append(eps, discovery.Endpoint{Addresses: []string{fmt.Sprintf("10.0.0.%d", i)}})
	}
	got, err := NewTrimmer().TrimForProxy(&discovery.EndpointSlice{Endpoints: eps})
	if err != nil {
		t.Fatal(err)
	}
	trimmed := got.(*discovery.EndpointSlice).Endpoints
	if len(trimmed) != 10 || cap(trimmed) != 10 {
		t.Fatalf("endpoints: len %d cap %d, want 10 and 10", len(trimmed), cap(trimmed))
	}
	for i := range trimmed {
		if want := fmt.Sprintf("10.0.0.%d", i); trimmed[i].Addresses[0] != want {
			t.Errorf("endpoint %d: %v, want %s", i, trimmed[i].Addresses, want)
		}
	}
}
