package model

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// generateSlice mirrors upstream's test generator: endpoints 10.0.<offset>.<i> for i in
// 1..n; i%unreadyMod==0 is not serving, i%terminatingMod==0 is terminating; endpoint i
// runs on hosts[i%len(hosts)]; ports are named port-<index>, TCP.
func generateSlice(svc, ns string, sliceNum, offset, n, unreadyMod, terminatingMod int, hosts []string, ports []*int32) *discovery.EndpointSlice {
	s := makeSlice(ns, svc, fmt.Sprintf("%s-%d", svc, sliceNum), nil)
	for i, p := range ports {
		s.Ports = append(s.Ports, discovery.EndpointPort{Name: ptr.To(fmt.Sprintf("port-%d", i)), Port: p, Protocol: ptr.To(v1.ProtocolTCP)})
	}
	for i := 1; i <= n; i++ {
		isReady := i%unreadyMod != 0
		isTerminating := i%terminatingMod == 0
		e := discovery.Endpoint{
			Addresses: []string{fmt.Sprintf("10.0.%d.%d", offset, i)},
			Conditions: discovery.EndpointConditions{
				Ready:       ptr.To(isReady && !isTerminating),
				Serving:     ptr.To(isReady),
				Terminating: ptr.To(isTerminating),
			},
		}
		if len(hosts) > 0 {
			e.NodeName = ptr.To(hosts[i%len(hosts)])
		}
		s.Endpoints = append(s.Endpoints, e)
	}
	return s
}

// epDesc renders an endpoint with its flags, e.g. "10.0.1.2:80 local ready serving".
func epDesc(e *Endpoint) string {
	parts := []string{e.String()}
	if e.IsLocal {
		parts = append(parts, "local")
	}
	if e.Ready {
		parts = append(parts, "ready")
	}
	if e.Serving {
		parts = append(parts, "serving")
	}
	if e.Terminating {
		parts = append(parts, "terminating")
	}
	return strings.Join(parts, " ")
}

func committedEndpoints(s *State, names ...ServicePortName) map[ServicePortName][]string {
	out := map[ServicePortName][]string{}
	for _, name := range names {
		for _, e := range s.Endpoints(name) {
			out[name] = append(out[name], epDesc(e))
		}
	}
	return out
}

func TestEndpointsFromSlices(t *testing.T) {
	svc1 := nsn("ns1", "svc1")
	port0 := spn("ns1", "svc1", "port-0", v1.ProtocolTCP)
	port1 := spn("ns1", "svc1", "port-1", v1.ProtocolTCP)
	p := ptr.To[int32]

	testCases := []struct {
		name     string
		hostname string
		slices   []*discovery.EndpointSlice
		expected map[ServicePortName][]string
	}{{
		name:     "1 slice, 2 hosts, ports 80,443",
		hostname: "host1",
		slices:   []*discovery.EndpointSlice{generateSlice("svc1", "ns1", 1, 1, 3, 999, 999, []string{"host1", "host2"}, []*int32{p(80), p(443)})},
		expected: map[ServicePortName][]string{
			port0: {"10.0.1.1:80 ready serving", "10.0.1.2:80 local ready serving", "10.0.1.3:80 ready serving"},
			port1: {"10.0.1.1:443 ready serving", "10.0.1.2:443 local ready serving", "10.0.1.3:443 ready serving"},
		},
	}, {
		name: "2 slices, same port",
		slices: []*discovery.EndpointSlice{
			generateSlice("svc1", "ns1", 1, 1, 3, 999, 999, nil, []*int32{p(80)}),
			generateSlice("svc1", "ns1", 2, 2, 3, 999, 999, nil, []*int32{p(80)}),
		},
		expected: map[ServicePortName][]string{
			port0: {"10.0.1.1:80 ready serving", "10.0.1.2:80 ready serving", "10.0.1.3:80 ready serving",
				"10.0.2.1:80 ready serving", "10.0.2.2:80 ready serving", "10.0.2.3:80 ready serving"},
		},
	}, {
		// Same slice name twice: the second replaces the first.
		name: "2 overlapping slices, same port",
		slices: []*discovery.EndpointSlice{
			generateSlice("svc1", "ns1", 1, 1, 3, 999, 999, nil, []*int32{p(80)}),
			generateSlice("svc1", "ns1", 1, 1, 4, 999, 999, nil, []*int32{p(80)}),
		},
		expected: map[ServicePortName][]string{
			port0: {"10.0.1.1:80 ready serving", "10.0.1.2:80 ready serving", "10.0.1.3:80 ready serving", "10.0.1.4:80 ready serving"},
		},
	}, {
		name: "2 slices, overlapping endpoints, some endpoints unready in 1 or both",
		slices: []*discovery.EndpointSlice{
			generateSlice("svc1", "ns1", 1, 1, 10, 3, 999, nil, []*int32{p(80)}),
			generateSlice("svc1", "ns1", 1, 1, 10, 6, 999, nil, []*int32{p(80)}),
		},
		expected: map[ServicePortName][]string{
			port0: {"10.0.1.10:80 ready serving", "10.0.1.1:80 ready serving", "10.0.1.2:80 ready serving", "10.0.1.3:80 ready serving",
				"10.0.1.4:80 ready serving", "10.0.1.5:80 ready serving", "10.0.1.6:80", "10.0.1.7:80 ready serving",
				"10.0.1.8:80 ready serving", "10.0.1.9:80 ready serving"},
		},
	}, {
		name: "2 slices, overlapping endpoints, some endpoints unready and some endpoints terminating",
		slices: []*discovery.EndpointSlice{
			generateSlice("svc1", "ns1", 1, 1, 10, 3, 5, nil, []*int32{p(80)}),
			generateSlice("svc1", "ns1", 1, 1, 10, 6, 5, nil, []*int32{p(80)}),
		},
		expected: map[ServicePortName][]string{
			port0: {"10.0.1.10:80 serving terminating", "10.0.1.1:80 ready serving", "10.0.1.2:80 ready serving", "10.0.1.3:80 ready serving",
				"10.0.1.4:80 ready serving", "10.0.1.5:80 serving terminating", "10.0.1.6:80", "10.0.1.7:80 ready serving",
				"10.0.1.8:80 ready serving", "10.0.1.9:80 ready serving"},
		},
	}, {
		name: "2 slices, overlapping endpoints, all unready",
		slices: []*discovery.EndpointSlice{
			generateSlice("svc1", "ns1", 1, 1, 10, 1, 999, nil, []*int32{p(80)}),
			generateSlice("svc1", "ns1", 1, 1, 10, 1, 999, nil, []*int32{p(80)}),
		},
		expected: map[ServicePortName][]string{
			port0: {"10.0.1.10:80", "10.0.1.1:80", "10.0.1.2:80", "10.0.1.3:80", "10.0.1.4:80",
				"10.0.1.5:80", "10.0.1.6:80", "10.0.1.7:80", "10.0.1.8:80", "10.0.1.9:80"},
		},
	}, {
		name: "3 slices with different services and namespaces",
		slices: []*discovery.EndpointSlice{
			generateSlice("svc1", "ns1", 1, 1, 3, 999, 999, nil, []*int32{p(80)}),
			generateSlice("svc2", "ns1", 2, 2, 3, 999, 999, nil, []*int32{p(80)}),
			generateSlice("svc1", "ns2", 3, 3, 3, 999, 999, nil, []*int32{p(80)}),
		},
		expected: map[ServicePortName][]string{
			port0: {"10.0.1.1:80 ready serving", "10.0.1.2:80 ready serving", "10.0.1.3:80 ready serving"},
		},
	}, {
		name:     "Nil port should not break anything",
		hostname: "host1",
		slices:   []*discovery.EndpointSlice{generateSlice("svc1", "ns1", 1, 1, 3, 999, 999, []string{"host1", "host2"}, []*int32{nil})},
		expected: map[ServicePortName][]string{},
	}, {
		name:     "Different endpoints with duplicate IPs should not be filtered",
		hostname: "host1",
		slices: []*discovery.EndpointSlice{
			generateSlice("svc1", "ns1", 1, 1, 2, 999, 999, []string{"host1", "host2"}, []*int32{p(80)}),
			generateSlice("svc1", "ns1", 2, 1, 2, 999, 999, []string{"host1", "host2"}, []*int32{p(8080)}),
		},
		expected: map[ServicePortName][]string{
			port0: {"10.0.1.1:80 ready serving", "10.0.1.1:8080 ready serving", "10.0.1.2:80 local ready serving", "10.0.1.2:8080 local ready serving"},
		},
	}, {
		name:     "with duplicate Endpoints, prefer non-terminating",
		hostname: "host1",
		slices: []*discovery.EndpointSlice{func() *discovery.EndpointSlice {
			s := generateSlice("svc1", "ns1", 1, 1, 1, 999, 999, []string{"host1"}, []*int32{p(80)})
			e1, e2, e3 := s.Endpoints[0], s.Endpoints[0], s.Endpoints[0]
			e1.Conditions = discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
			e2.Conditions = discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}
			e3.Conditions = discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(true)}
			s.Endpoints = []discovery.Endpoint{e1, e2, e3}
			return s
		}()},
		expected: map[ServicePortName][]string{
			port0: {"10.0.1.1:80 local ready serving"},
		},
	}, {
		name: "duplicates across slices: first terminating entry is kept over a later terminating one",
		slices: []*discovery.EndpointSlice{
			makeSlice("ns1", "svc1", "a", func(s *discovery.EndpointSlice) {
				s.Ports = []discovery.EndpointPort{slicePort("port-0", 80, v1.ProtocolTCP)}
				s.Endpoints = []discovery.Endpoint{ep("10.0.0.1", conditions(ptr.To(false), ptr.To(true), ptr.To(true)))}
			}),
			makeSlice("ns1", "svc1", "b", func(s *discovery.EndpointSlice) {
				s.Ports = []discovery.EndpointPort{slicePort("port-0", 80, v1.ProtocolTCP)}
				s.Endpoints = []discovery.Endpoint{ep("10.0.0.1", conditions(ptr.To(false), ptr.To(false), ptr.To(true)))}
			}),
		},
		expected: map[ServicePortName][]string{port0: {"10.0.0.1:80 serving terminating"}},
	}, {
		name: "nil conditions: ready, serving, not terminating",
		slices: []*discovery.EndpointSlice{makeSlice("ns1", "svc1", "a", func(s *discovery.EndpointSlice) {
			s.Ports = []discovery.EndpointPort{slicePort("port-0", 80, v1.ProtocolTCP)}
			s.Endpoints = []discovery.Endpoint{
				ep("10.0.0.1"),
				ep("10.0.0.2", conditions(ptr.To(false), nil, nil)),
				ep("10.0.0.3", conditions(nil, ptr.To(false), ptr.To(true))),
			}
		})},
		expected: map[ServicePortName][]string{port0: {"10.0.0.1:80 ready serving", "10.0.0.2:80 serving", "10.0.0.3:80 ready terminating"}},
	}, {
		name: "endpoints without addresses or with bad ones are skipped; only the first address counts",
		slices: []*discovery.EndpointSlice{makeSlice("ns1", "svc1", "a", func(s *discovery.EndpointSlice) {
			s.Ports = []discovery.EndpointPort{slicePort("port-0", 80, v1.ProtocolTCP), {Name: ptr.To("port-1"), Port: ptr.To[int32](0)}}
			s.Endpoints = []discovery.Endpoint{
				{},
				ep("bogus"),
				ep("fd00::1"),
				{Addresses: []string{"10.0.0.9", "10.0.0.8"}},
			}
		})},
		expected: map[ServicePortName][]string{port0: {"10.0.0.9:80 ready serving"}},
	}, {
		name: "port protocol is part of the name; nil protocol means TCP",
		slices: []*discovery.EndpointSlice{makeSlice("ns1", "svc1", "a", func(s *discovery.EndpointSlice) {
			s.Ports = []discovery.EndpointPort{slicePort("port-0", 53, v1.ProtocolUDP), {Name: ptr.To("port-1"), Port: ptr.To[int32](80)}}
			s.Endpoints = []discovery.Endpoint{ep("10.0.0.1")}
		})},
		expected: map[ServicePortName][]string{
			spn("ns1", "svc1", "port-0", v1.ProtocolUDP): {"10.0.0.1:53 ready serving"},
			port1: {"10.0.0.1:80 ready serving"},
		},
	}}

	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewState(v1.IPv4Protocol, tc.hostname)
			originals := make([]*discovery.EndpointSlice, len(tc.slices))
			for i, slice := range tc.slices {
				originals[i] = slice.DeepCopy()
				s.AddEndpointSlice(slice)
			}
			s.Commit()
			names := []ServicePortName{port0, port1, spn("ns1", "svc1", "port-0", v1.ProtocolUDP)}
			got := committedEndpoints(s, names...)
			if len(got) != len(tc.expected) {
				t.Errorf("got %v, want %v", got, tc.expected)
			}
			for name, want := range tc.expected {
				if !slices.Equal(got[name], want) {
					t.Errorf("%s:\n got %q\nwant %q", name, got[name], want)
				}
			}
			for i, slice := range tc.slices {
				if !equalSlices(slice, originals[i]) {
					t.Errorf("slice %d was mutated", i)
				}
			}
			_ = svc1
		})
	}
}

func equalSlices(a, b *discovery.EndpointSlice) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func TestEndpointHintsZoneAndNode(t *testing.T) {
	slice := makeSlice("ns", "svc", "a", func(s *discovery.EndpointSlice) {
		s.Ports = []discovery.EndpointPort{slicePort("", 80, v1.ProtocolTCP)}
		s.Endpoints = []discovery.Endpoint{
			ep("10.0.0.1", onNode("n1"), zoneHints("z1", "z2", "z1"), nodeHints("n1"), func(e *discovery.Endpoint) { e.Zone = ptr.To("z1") }),
			ep("10.0.0.2", onNode(testNode), func(e *discovery.Endpoint) { e.Hints = &discovery.EndpointHints{} }),
		}
	})
	eps, problems := endpointsForService(nsn("ns", "svc"), []*discovery.EndpointSlice{slice}, testNode)
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	got := eps.Get(spn("ns", "svc", "", v1.ProtocolTCP))
	if len(got) != 2 {
		t.Fatalf("got %v", got)
	}
	if e := got[0]; e.NodeName() != "n1" || e.Zone() != "z1" || e.IsLocal || !slices.Equal(e.ZoneHints(), []string{"z1", "z2"}) || !slices.Equal(e.NodeHints(), []string{"n1"}) {
		t.Errorf("endpoint 0 = %+v", e)
	}
	if e := got[1]; !e.IsLocal || e.Hints != nil {
		t.Errorf("endpoint 1 = %+v", e)
	}
	// Without a node name nothing is local.
	eps, _ = endpointsForService(nsn("ns", "svc"), []*discovery.EndpointSlice{slice}, "")
	for _, e := range eps.Get(spn("ns", "svc", "", v1.ProtocolTCP)) {
		if e.IsLocal {
			t.Errorf("endpoint %s local with empty node name", e)
		}
	}
}

func TestEndpointsProblems(t *testing.T) {
	slice := makeSlice("ns", "svc", "a", func(s *discovery.EndpointSlice) {
		s.Ports = []discovery.EndpointPort{{Port: ptr.To[int32](80)}, {Name: ptr.To("x")}, slicePort("y", 80, v1.ProtocolTCP)}
		s.Endpoints = []discovery.Endpoint{{}, ep("300.1.1.1")}
	})
	_, problems := endpointsForService(nsn("ns", "svc"), []*discovery.EndpointSlice{slice, nil}, "")
	var fields []string
	for _, p := range problems {
		fields = append(fields, p.Field)
		if p.Kind != "EndpointSlice" || p.Object != (types.NamespacedName{Namespace: "ns", Name: "a"}) {
			t.Errorf("problem names %s %s", p.Kind, p.Object)
		}
	}
	want := []string{"endpoints[0].addresses", "endpoints[1].addresses[0]", "ports[0].name", "ports[1].port"}
	if !slices.Equal(fields, want) {
		t.Errorf("problem fields %q, want %q", fields, want)
	}
}

// The model's lists point into the converted slices: a port served by one slice
// costs pointers, not copies (the informer cache and the model share endpoints).
// Ports served by several slices are merged, each IP:port once, in "ip:port" order.
func TestEndpointsShareConvertedSlices(t *testing.T) {
	a := NewEndpointSlice(makeSlice("ns", "svc", "a", func(s *discovery.EndpointSlice) {
		s.Ports = []discovery.EndpointPort{slicePort("", 80, v1.ProtocolTCP)}
		s.Endpoints = []discovery.Endpoint{ep("10.0.0.10"), ep("10.0.0.2"), ep("10.0.0.1")}
	}), testNode, nil)
	eps, _ := EndpointsForService(nsn("ns", "svc"), []*EndpointSlice{a})
	got := eps.Get(spn("ns", "svc", "", v1.ProtocolTCP))
	if len(got) != 3 {
		t.Fatalf("got %v", got)
	}
	for i := range got {
		if got[i] != &a.Ports[0].Endpoints[i] {
			t.Errorf("endpoint %d (%s) is a copy, not the slice's", i, got[i])
		}
	}
	if fmt.Sprint(got) != "[10.0.0.10:80 10.0.0.1:80 10.0.0.2:80]" {
		t.Errorf("order %v, want upstream's (by \"ip:port\" string)", got)
	}

	b := NewEndpointSlice(makeSlice("ns", "svc", "b", func(s *discovery.EndpointSlice) {
		s.Ports = []discovery.EndpointPort{slicePort("", 80, v1.ProtocolTCP)}
		s.Endpoints = []discovery.Endpoint{ep("10.0.0.3"), ep("10.0.0.2", func(e *discovery.Endpoint) { e.Conditions.Ready = ptr.To(false) })}
	}), testNode, nil)
	eps, _ = EndpointsForService(nsn("ns", "svc"), []*EndpointSlice{a, b})
	got = eps.Get(spn("ns", "svc", "", v1.ProtocolTCP))
	if fmt.Sprint(got) != "[10.0.0.10:80 10.0.0.1:80 10.0.0.2:80 10.0.0.3:80]" || got[2].Ready {
		t.Errorf("merged %v (10.0.0.2 ready %v), want 4 endpoints, 10.0.0.2 from the later slice (not ready)", got, got[2].Ready)
	}
	if len(a.Ports[0].Endpoints) != 3 || !a.Ports[0].Endpoints[1].Ready {
		t.Errorf("merging changed a converted slice: %+v", a.Ports[0].Endpoints)
	}
}

// A slice converted for another node than the State's is converted again: IsLocal
// follows the State's node.
func TestStateReconvertsSlicesForItsNode(t *testing.T) {
	api := makeSlice("ns", "svc", "a", func(s *discovery.EndpointSlice) {
		s.Ports = []discovery.EndpointPort{slicePort("", 80, v1.ProtocolTCP)}
		s.Endpoints = []discovery.Endpoint{ep("10.0.0.1", onNode(testNode))}
	})
	other := NewEndpointSlice(api, "other-node", nil)
	s := NewState(v1.IPv4Protocol, testNode)
	s.OnEndpointSliceAdd(other)
	s.Commit()
	got := s.services[nsn("ns", "svc")].endpoints.Get(spn("ns", "svc", "", v1.ProtocolTCP))
	if len(got) != 1 || !got[0].IsLocal {
		t.Errorf("endpoints %+v, want one local endpoint", got)
	}
	if other.Ports[0].Endpoints[0].IsLocal {
		t.Error("the shared slice was modified")
	}
}
