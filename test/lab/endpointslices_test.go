package lab

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func testService(families ...v1.IPFamily) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1", Labels: map[string]string{"app": "web"}},
		Spec: v1.ServiceSpec{
			IPFamilies: families,
			Ports: []v1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP},
				{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP},
			},
		},
	}
}

func TestPortsFromService(t *testing.T) {
	got := PortsFromService(testService())
	want := []discoveryv1.EndpointPort{
		{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8080)},
		{Name: ptr.To("dns"), Protocol: ptr.To(v1.ProtocolUDP), Port: ptr.To[int32](53)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestBuildEndpointSlicesMetadata(t *testing.T) {
	svc := testService(v1.IPv4Protocol, v1.IPv6Protocol)
	trigger := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	ep := ReadyEndpoint("node1-pod1", "node1", "zone-a", netip.MustParseAddr("10.244.1.2"), netip.MustParseAddr("fd00:10:244:1::2"))
	ep.ForZones = []string{"zone-a"}
	ep.ForNodes = []string{"node1"}
	slices := BuildEndpointSlices(svc, []Endpoint{ep}, PortsFromService(svc), SliceOptions{TriggerTime: trigger})
	if len(slices) != 2 {
		t.Fatalf("got %d slices, want 2", len(slices))
	}
	s := slices[0]
	if s.Name != "web-v4-0" || s.AddressType != discoveryv1.AddressTypeIPv4 || slices[1].AddressType != discoveryv1.AddressTypeIPv6 {
		t.Errorf("names/types: %s %s %s", s.Name, s.AddressType, slices[1].AddressType)
	}
	wantLabels := map[string]string{"app": "web", discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: ControllerName}
	if diff := cmp.Diff(wantLabels, s.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if got := s.Annotations[v1.EndpointsLastChangeTriggerTime]; got != "2026-01-02T03:04:05.000006Z" {
		t.Errorf("trigger annotation = %q", got)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != "uid-1" || s.OwnerReferences[0].Kind != "Service" || !*s.OwnerReferences[0].Controller {
		t.Errorf("owner references: %+v", s.OwnerReferences)
	}
	want := discoveryv1.Endpoint{
		Addresses:  []string{"10.244.1.2"},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
		NodeName:   ptr.To("node1"),
		Zone:       ptr.To("zone-a"),
		TargetRef:  &v1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "node1-pod1"},
		Hints: &discoveryv1.EndpointHints{
			ForZones: []discoveryv1.ForZone{{Name: "zone-a"}},
			ForNodes: []discoveryv1.ForNode{{Name: "node1"}},
		},
	}
	if diff := cmp.Diff([]discoveryv1.Endpoint{want}, s.Endpoints); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
	if got := slices[1].Endpoints[0].Addresses[0]; got != "fd00:10:244:1::2" {
		t.Errorf("v6 address = %s", got)
	}
}

func TestBuildEndpointSlicesShapes(t *testing.T) {
	many := func(n int) []Endpoint {
		var out []Endpoint
		for i := 0; i < n; i++ {
			out = append(out, ReadyEndpoint(fmt.Sprintf("p%d", i), "node1", "", netip.AddrFrom4([4]byte{10, 244, 1, byte(i + 2)})))
		}
		return out
	}
	tests := []struct {
		name      string
		families  []v1.IPFamily
		endpoints []Endpoint
		max       int
		want      map[string]int // slice name -> endpoint count
	}{
		{"no endpoints gives an empty slice", []v1.IPFamily{v1.IPv4Protocol}, nil, 0, map[string]int{"web-v4-0": 0}},
		{"families from endpoints", nil, many(2), 0, map[string]int{"web-v4-0": 2}},
		{"chunked", []v1.IPFamily{v1.IPv4Protocol}, many(5), 2, map[string]int{"web-v4-0": 2, "web-v4-1": 2, "web-v4-2": 1}},
		{"exact multiple", []v1.IPFamily{v1.IPv4Protocol}, many(4), 2, map[string]int{"web-v4-0": 2, "web-v4-1": 2}},
		{"dual stack, v4 only endpoints", []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}, many(1), 0, map[string]int{"web-v4-0": 1, "web-v6-0": 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := testService(tc.families...)
			got := map[string]int{}
			for _, s := range BuildEndpointSlices(svc, tc.endpoints, nil, SliceOptions{MaxPerSlice: tc.max}) {
				got[s.Name] = len(s.Endpoints)
				if s.Endpoints == nil {
					t.Errorf("%s: nil endpoints (API wants a list)", s.Name)
				}
				if _, ok := s.Annotations[v1.EndpointsLastChangeTriggerTime]; ok {
					t.Errorf("%s: trigger annotation without trigger time", s.Name)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
