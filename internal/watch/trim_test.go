package watch

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kproxy/kproxy/internal/model"
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
	got, err := NewTrimmer("node-a").TrimForProxy(slice)
	if err != nil {
		t.Fatal(err)
	}
	want := &model.EndpointSlice{
		SliceMeta:   model.SliceMeta{Name: "web-abc", Namespace: "ns", UID: "u1", ResourceVersion: "42"},
		AddressType: discovery.AddressTypeIPv4,
		Service:     "web",
		TriggerTime: "2030-01-01T00:00:00Z",
		Node:        "node-a",
		Ports: []model.SlicePort{{Name: "http", Protocol: v1.ProtocolTCP, Endpoints: []model.Endpoint{{
			IP: netip.MustParseAddr("10.0.0.1"), Port: 8080, Ready: true, Serving: true, IsLocal: true,
			Place: &model.Place{NodeName: "node-a", Zone: "z1"}, Hints: &model.EndpointHints{Zones: []string{"z1"}},
		}}}},
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(model.EndpointSlice{}, "Digest"), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("converted EndpointSlice (-want +got):\n%s", diff)
	}
}

func TestTrimForProxyService(t *testing.T) {
	svc := &v1.Service{
		ObjectMeta: fullMeta(map[string]string{"app": "web"}, map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"}),
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []v1.ServicePort{{Port: 80}}, Type: v1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "web"}},
		Status: v1.ServiceStatus{
			LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "192.0.2.10"}}},
			Conditions:   []metav1.Condition{{Type: "x"}},
		},
	}
	got, err := NewTrimmer("node-a").TrimForProxy(svc)
	if err != nil {
		t.Fatal(err)
	}
	want := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "ns", UID: "u1", ResourceVersion: "42"},
		Spec:       v1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []v1.ServicePort{{Port: 80}}, Type: v1.ServiceTypeLoadBalancer},
		Status:     v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "192.0.2.10"}}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trimmed Service (-want +got):\n%s", diff)
	}
}

func TestTrimForProxyOtherKinds(t *testing.T) {
	node := &v1.Node{ObjectMeta: fullMeta(map[string]string{v1.LabelTopologyZone: "z1"}, map[string]string{"a": "b"})}
	got, err := NewTrimmer("node-a").TrimForProxy(node)
	if err != nil {
		t.Fatal(err)
	}
	n := got.(*v1.Node)
	if n.ManagedFields != nil || n.Labels[v1.LabelTopologyZone] != "z1" || n.Annotations["a"] != "b" || len(n.OwnerReferences) != 1 {
		t.Errorf("a Node must only lose its managedFields: %+v", n.ObjectMeta)
	}
}

// Endpoints of different slices on one node and zone share one model.Place; the values
// stay what the API said.
func TestTrimForProxySharesEndpointValues(t *testing.T) {
	trimmer := NewTrimmer("node-a")
	slice := func(name, node string, ready bool) *discovery.EndpointSlice {
		return &discovery.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "ns"},
			AddressType: discovery.AddressTypeIPv4,
			Ports:       []discovery.EndpointPort{{Name: ptr.To(""), Port: ptr.To[int32](80)}},
			Endpoints: []discovery.Endpoint{{
				Addresses:  []string{"10.0.0.1"},
				Conditions: discovery.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(true)},
				NodeName:   ptr.To(strings.Clone(node)),
				Zone:       ptr.To(strings.Clone("z1")),
			}},
		}
	}
	trim := func(s *discovery.EndpointSlice) model.Endpoint {
		t.Helper()
		got, err := trimmer.TrimForProxy(s)
		if err != nil {
			t.Fatal(err)
		}
		return got.(*model.EndpointSlice).Ports[0].Endpoints[0]
	}
	a, b, c := trim(slice("a", "node-a", true)), trim(slice("b", "node-a", true)), trim(slice("c", "node-b", false))
	if a.Place != b.Place || a.Place == c.Place {
		t.Errorf("endpoints of one node and zone do not share their Place, or of two do")
	}
	if c.NodeName() != "node-b" || a.NodeName() != "node-a" || a.Zone() != c.Zone() || c.Ready || !a.Ready || c.Terminating || !a.IsLocal || c.IsLocal {
		t.Errorf("values changed: %+v %+v", a, c)
	}
}
