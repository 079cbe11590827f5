package model

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// testSlice builds slice <name>-<num> of Service ns/name with the given endpoints and
// UDP ports (name:number pairs).
func testSlice(ns, name string, num int, eps []discovery.Endpoint, ports ...discovery.EndpointPort) *discovery.EndpointSlice {
	return makeSlice(ns, name, fmt.Sprintf("%s-%d", name, num), func(s *discovery.EndpointSlice) {
		s.Endpoints = eps
		s.Ports = ports
	})
}

func udp(name string, port int32) discovery.EndpointPort {
	return slicePort(name, port, v1.ProtocolUDP)
}

// allCommittedEndpoints renders every committed endpoint list of s.
func allCommittedEndpoints(s *State) map[ServicePortName][]string {
	out := map[ServicePortName][]string{}
	for _, st := range s.services {
		for _, pe := range st.endpoints {
			for _, e := range pe.Endpoints {
				out[pe.Name] = append(out[pe.Name], epDesc(e))
			}
		}
	}
	return out
}

func TestUpdateEndpointsMap(t *testing.T) {
	local := onNode(testNode)
	readyC := conditions(ptr.To(true), ptr.To(true), ptr.To(false))
	terminatingC := conditions(ptr.To(false), ptr.To(true), ptr.To(true))

	emptyEndpoint := func(ns, n string, i int) *discovery.EndpointSlice { return testSlice(ns, n, i, []discovery.Endpoint{}) }
	unnamedPort := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("1.1.1.1")}, udp("", 11))
	}
	unnamedPortReady := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("1.1.1.1", readyC)}, udp("", 11))
	}
	unnamedPortTerminating := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("1.1.1.1", terminatingC)}, udp("", 11))
	}
	unnamedPortLocal := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("1.1.1.1", local)}, udp("", 11))
	}
	namedPortLocal := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("1.1.1.1", local)}, udp("p11", 11))
	}
	namedPort := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("1.1.1.1")}, udp("p11", 11))
	}
	namedPortRenamed := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("1.1.1.1")}, udp("p11-2", 11))
	}
	namedPortRenumbered := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("1.1.1.1")}, udp("p11", 22))
	}
	namedPortsLocalNoLocal := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("1.1.1.1"), ep("1.1.1.2", local)}, udp("p11", 11), udp("p12", 12))
	}
	multipleSubsetsS1 := namedPort
	multipleSubsetsS2 := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("1.1.1.2")}, udp("p12", 12))
	}
	multipleSubsetsWithLocalS2 := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("1.1.1.2", local)}, udp("p12", 12))
	}
	multiPortsLocalS1 := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("1.1.1.1", local)}, udp("p11", 11), udp("p12", 12))
	}
	multiPortsLocalS2 := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("1.1.1.3")}, udp("p13", 13))
	}
	ipsPorts1S1 := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("1.1.1.1"), ep("1.1.1.2", local)}, udp("p11", 11), udp("p12", 12))
	}
	ipsPorts1S2 := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("1.1.1.3"), ep("1.1.1.4", local)}, udp("p13", 13), udp("p14", 14))
	}
	ipsPorts2 := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("2.2.2.1"), ep("2.2.2.2", local)}, udp("p21", 21), udp("p22", 22))
	}
	complexBefore1 := namedPort
	complexBefore2S1 := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("2.2.2.2", local), ep("2.2.2.22", local)}, udp("p22", 22))
	}
	complexBefore2S2 := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("2.2.2.3", local)}, udp("p23", 23))
	}
	complexBefore4S1 := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("4.4.4.4", local), ep("4.4.4.5", local)}, udp("p44", 44))
	}
	complexBefore4S2 := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("4.4.4.6", local)}, udp("p45", 45))
	}
	complexAfter1S1 := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("1.1.1.1"), ep("1.1.1.11")}, udp("p11", 11))
	}
	complexAfter1S2 := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("1.1.1.2")}, udp("p12", 12), udp("p122", 122))
	}
	complexAfter3 := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("3.3.3.3")}, udp("p33", 33))
	}
	complexAfter4 := func(ns, n string, i int) *discovery.EndpointSlice {
		return testSlice(ns, n, i, []discovery.Endpoint{ep("4.4.4.4", local)}, udp("p44", 44))
	}

	const rs = "ready serving"
	const lrs = "local ready serving"
	p := func(ns, name, port string) ServicePortName { return spn(ns, name, port, v1.ProtocolUDP) }

	testCases := []struct {
		name                     string
		previous, current        []*discovery.EndpointSlice
		previousMap, expectedMap map[ServicePortName][]string
		expectedConntrack        bool
		expectedLocalEndpoints   map[types.NamespacedName]int
		expectedChanged          []types.NamespacedName
		expectedStale            map[ServicePortName][]string
		expectedGained           []ServicePortName
	}{{
		name: "empty",
	}, {
		name:                   "no change, unnamed port",
		previous:               []*discovery.EndpointSlice{unnamedPort("ns1", "ep1", 1)},
		current:                []*discovery.EndpointSlice{unnamedPort("ns1", "ep1", 1)},
		previousMap:            map[ServicePortName][]string{p("ns1", "ep1", ""): {"1.1.1.1:11 " + rs}},
		expectedMap:            map[ServicePortName][]string{p("ns1", "ep1", ""): {"1.1.1.1:11 " + rs}},
		expectedLocalEndpoints: map[types.NamespacedName]int{},
	}, {
		name:                   "no change, named port, local",
		previous:               []*discovery.EndpointSlice{namedPortLocal("ns1", "ep1", 1)},
		current:                []*discovery.EndpointSlice{namedPortLocal("ns1", "ep1", 1)},
		previousMap:            map[ServicePortName][]string{p("ns1", "ep1", "p11"): {"1.1.1.1:11 " + lrs}},
		expectedMap:            map[ServicePortName][]string{p("ns1", "ep1", "p11"): {"1.1.1.1:11 " + lrs}},
		expectedLocalEndpoints: map[types.NamespacedName]int{nsn("ns1", "ep1"): 1},
	}, {
		name:     "no change, multiple slices",
		previous: []*discovery.EndpointSlice{multipleSubsetsS1("ns1", "ep1", 1), multipleSubsetsS2("ns1", "ep1", 2)},
		current:  []*discovery.EndpointSlice{multipleSubsetsS1("ns1", "ep1", 1), multipleSubsetsS2("ns1", "ep1", 2)},
		previousMap: map[ServicePortName][]string{
			p("ns1", "ep1", "p11"): {"1.1.1.1:11 " + rs},
			p("ns1", "ep1", "p12"): {"1.1.1.2:12 " + rs},
		},
		expectedMap: map[ServicePortName][]string{
			p("ns1", "ep1", "p11"): {"1.1.1.1:11 " + rs},
			p("ns1", "ep1", "p12"): {"1.1.1.2:12 " + rs},
		},
	}, {
		name:     "no change, multiple slices, multiple ports, local",
		previous: []*discovery.EndpointSlice{multiPortsLocalS1("ns1", "ep1", 1), multiPortsLocalS2("ns1", "ep1", 2)},
		current:  []*discovery.EndpointSlice{multiPortsLocalS1("ns1", "ep1", 1), multiPortsLocalS2("ns1", "ep1", 2)},
		previousMap: map[ServicePortName][]string{
			p("ns1", "ep1", "p11"): {"1.1.1.1:11 " + lrs},
			p("ns1", "ep1", "p12"): {"1.1.1.1:12 " + lrs},
			p("ns1", "ep1", "p13"): {"1.1.1.3:13 " + rs},
		},
		expectedMap: map[ServicePortName][]string{
			p("ns1", "ep1", "p11"): {"1.1.1.1:11 " + lrs},
			p("ns1", "ep1", "p12"): {"1.1.1.1:12 " + lrs},
			p("ns1", "ep1", "p13"): {"1.1.1.3:13 " + rs},
		},
		expectedLocalEndpoints: map[types.NamespacedName]int{nsn("ns1", "ep1"): 1},
	}, {
		name:     "no change, multiple services, slices, IPs, and ports",
		previous: []*discovery.EndpointSlice{ipsPorts1S1("ns1", "ep1", 1), ipsPorts1S2("ns1", "ep1", 2), ipsPorts2("ns2", "ep2", 1)},
		current:  []*discovery.EndpointSlice{ipsPorts1S1("ns1", "ep1", 1), ipsPorts1S2("ns1", "ep1", 2), ipsPorts2("ns2", "ep2", 1)},
		previousMap: map[ServicePortName][]string{
			p("ns1", "ep1", "p11"): {"1.1.1.1:11 " + rs, "1.1.1.2:11 " + lrs},
			p("ns1", "ep1", "p12"): {"1.1.1.1:12 " + rs, "1.1.1.2:12 " + lrs},
			p("ns1", "ep1", "p13"): {"1.1.1.3:13 " + rs, "1.1.1.4:13 " + lrs},
			p("ns1", "ep1", "p14"): {"1.1.1.3:14 " + rs, "1.1.1.4:14 " + lrs},
			p("ns2", "ep2", "p21"): {"2.2.2.1:21 " + rs, "2.2.2.2:21 " + lrs},
			p("ns2", "ep2", "p22"): {"2.2.2.1:22 " + rs, "2.2.2.2:22 " + lrs},
		},
		expectedMap: map[ServicePortName][]string{
			p("ns1", "ep1", "p11"): {"1.1.1.1:11 " + rs, "1.1.1.2:11 " + lrs},
			p("ns1", "ep1", "p12"): {"1.1.1.1:12 " + rs, "1.1.1.2:12 " + lrs},
			p("ns1", "ep1", "p13"): {"1.1.1.3:13 " + rs, "1.1.1.4:13 " + lrs},
			p("ns1", "ep1", "p14"): {"1.1.1.3:14 " + rs, "1.1.1.4:14 " + lrs},
			p("ns2", "ep2", "p21"): {"2.2.2.1:21 " + rs, "2.2.2.2:21 " + lrs},
			p("ns2", "ep2", "p22"): {"2.2.2.1:22 " + rs, "2.2.2.2:22 " + lrs},
		},
		expectedLocalEndpoints: map[types.NamespacedName]int{nsn("ns1", "ep1"): 2, nsn("ns2", "ep2"): 1},
	}, {
		name:                   "add an EndpointSlice",
		previous:               []*discovery.EndpointSlice{nil},
		current:                []*discovery.EndpointSlice{unnamedPortLocal("ns1", "ep1", 1)},
		expectedMap:            map[ServicePortName][]string{p("ns1", "ep1", ""): {"1.1.1.1:11 " + lrs}},
		expectedConntrack:      true,
		expectedLocalEndpoints: map[types.NamespacedName]int{nsn("ns1", "ep1"): 1},
		expectedChanged:        []types.NamespacedName{nsn("ns1", "ep1")},
		expectedGained:         []ServicePortName{p("ns1", "ep1", "")},
	}, {
		name:              "remove an EndpointSlice",
		previous:          []*discovery.EndpointSlice{unnamedPortLocal("ns1", "ep1", 1)},
		current:           []*discovery.EndpointSlice{nil},
		previousMap:       map[ServicePortName][]string{p("ns1", "ep1", ""): {"1.1.1.1:11 " + lrs}},
		expectedConntrack: true,
		expectedChanged:   []types.NamespacedName{nsn("ns1", "ep1")},
		expectedStale:     map[ServicePortName][]string{p("ns1", "ep1", ""): {"1.1.1.1:11"}},
	}, {
		name:        "add an IP and port",
		previous:    []*discovery.EndpointSlice{namedPort("ns1", "ep1", 1)},
		current:     []*discovery.EndpointSlice{namedPortsLocalNoLocal("ns1", "ep1", 1)},
		previousMap: map[ServicePortName][]string{p("ns1", "ep1", "p11"): {"1.1.1.1:11 " + rs}},
		expectedMap: map[ServicePortName][]string{
			p("ns1", "ep1", "p11"): {"1.1.1.1:11 " + rs, "1.1.1.2:11 " + lrs},
			p("ns1", "ep1", "p12"): {"1.1.1.1:12 " + rs, "1.1.1.2:12 " + lrs},
		},
		expectedConntrack:      true,
		expectedLocalEndpoints: map[types.NamespacedName]int{nsn("ns1", "ep1"): 1},
		expectedChanged:        []types.NamespacedName{nsn("ns1", "ep1")},
		expectedGained:         []ServicePortName{p("ns1", "ep1", "p12")},
	}, {
		name:     "remove an IP and port",
		previous: []*discovery.EndpointSlice{namedPortsLocalNoLocal("ns1", "ep1", 1)},
		current:  []*discovery.EndpointSlice{namedPort("ns1", "ep1", 1)},
		previousMap: map[ServicePortName][]string{
			p("ns1", "ep1", "p11"): {"1.1.1.1:11 " + rs, "1.1.1.2:11 " + lrs},
			p("ns1", "ep1", "p12"): {"1.1.1.1:12 " + rs, "1.1.1.2:12 " + lrs},
		},
		expectedMap:       map[ServicePortName][]string{p("ns1", "ep1", "p11"): {"1.1.1.1:11 " + rs}},
		expectedConntrack: true,
		expectedChanged:   []types.NamespacedName{nsn("ns1", "ep1")},
		expectedStale: map[ServicePortName][]string{
			p("ns1", "ep1", "p11"): {"1.1.1.2:11"},
			p("ns1", "ep1", "p12"): {"1.1.1.1:12", "1.1.1.2:12"},
		},
	}, {
		name:        "add a slice to an endpoint",
		previous:    []*discovery.EndpointSlice{namedPort("ns1", "ep1", 1), nil},
		current:     []*discovery.EndpointSlice{multipleSubsetsS1("ns1", "ep1", 1), multipleSubsetsWithLocalS2("ns1", "ep1", 2)},
		previousMap: map[ServicePortName][]string{p("ns1", "ep1", "p11"): {"1.1.1.1:11 " + rs}},
		expectedMap: map[ServicePortName][]string{
			p("ns1", "ep1", "p11"): {"1.1.1.1:11 " + rs},
			p("ns1", "ep1", "p12"): {"1.1.1.2:12 " + lrs},
		},
		expectedConntrack:      true,
		expectedLocalEndpoints: map[types.NamespacedName]int{nsn("ns1", "ep1"): 1},
		expectedChanged:        []types.NamespacedName{nsn("ns1", "ep1")},
		expectedGained:         []ServicePortName{p("ns1", "ep1", "p12")},
	}, {
		name:     "remove a slice from an endpoint",
		previous: []*discovery.EndpointSlice{multipleSubsetsS1("ns1", "ep1", 1), multipleSubsetsS2("ns1", "ep1", 2)},
		current:  []*discovery.EndpointSlice{namedPort("ns1", "ep1", 1), nil},
		previousMap: map[ServicePortName][]string{
			p("ns1", "ep1", "p11"): {"1.1.1.1:11 " + rs},
			p("ns1", "ep1", "p12"): {"1.1.1.2:12 " + rs},
		},
		expectedMap:       map[ServicePortName][]string{p("ns1", "ep1", "p11"): {"1.1.1.1:11 " + rs}},
		expectedConntrack: true,
		expectedChanged:   []types.NamespacedName{nsn("ns1", "ep1")},
		expectedStale:     map[ServicePortName][]string{p("ns1", "ep1", "p12"): {"1.1.1.2:12"}},
	}, {
		name:              "rename a port",
		previous:          []*discovery.EndpointSlice{namedPort("ns1", "ep1", 1)},
		current:           []*discovery.EndpointSlice{namedPortRenamed("ns1", "ep1", 1)},
		previousMap:       map[ServicePortName][]string{p("ns1", "ep1", "p11"): {"1.1.1.1:11 " + rs}},
		expectedMap:       map[ServicePortName][]string{p("ns1", "ep1", "p11-2"): {"1.1.1.1:11 " + rs}},
		expectedConntrack: true,
		expectedChanged:   []types.NamespacedName{nsn("ns1", "ep1")},
		expectedStale:     map[ServicePortName][]string{p("ns1", "ep1", "p11"): {"1.1.1.1:11"}},
		expectedGained:    []ServicePortName{p("ns1", "ep1", "p11-2")},
	}, {
		name:              "renumber a port",
		previous:          []*discovery.EndpointSlice{namedPort("ns1", "ep1", 1)},
		current:           []*discovery.EndpointSlice{namedPortRenumbered("ns1", "ep1", 1)},
		previousMap:       map[ServicePortName][]string{p("ns1", "ep1", "p11"): {"1.1.1.1:11 " + rs}},
		expectedMap:       map[ServicePortName][]string{p("ns1", "ep1", "p11"): {"1.1.1.1:22 " + rs}},
		expectedConntrack: true,
		expectedChanged:   []types.NamespacedName{nsn("ns1", "ep1")},
		expectedStale:     map[ServicePortName][]string{p("ns1", "ep1", "p11"): {"1.1.1.1:11"}},
	}, {
		name: "complex add and remove",
		previous: []*discovery.EndpointSlice{
			complexBefore1("ns1", "ep1", 1), nil,
			complexBefore2S1("ns2", "ep2", 1), complexBefore2S2("ns2", "ep2", 2),
			nil, nil,
			complexBefore4S1("ns4", "ep4", 1), complexBefore4S2("ns4", "ep4", 2),
		},
		current: []*discovery.EndpointSlice{
			complexAfter1S1("ns1", "ep1", 1), complexAfter1S2("ns1", "ep1", 2),
			nil, nil,
			complexAfter3("ns3", "ep3", 1), nil,
			complexAfter4("ns4", "ep4", 1), nil,
		},
		previousMap: map[ServicePortName][]string{
			p("ns1", "ep1", "p11"): {"1.1.1.1:11 " + rs},
			p("ns2", "ep2", "p22"): {"2.2.2.22:22 " + lrs, "2.2.2.2:22 " + lrs},
			p("ns2", "ep2", "p23"): {"2.2.2.3:23 " + lrs},
			p("ns4", "ep4", "p44"): {"4.4.4.4:44 " + lrs, "4.4.4.5:44 " + lrs},
			p("ns4", "ep4", "p45"): {"4.4.4.6:45 " + lrs},
		},
		expectedMap: map[ServicePortName][]string{
			p("ns1", "ep1", "p11"):  {"1.1.1.11:11 " + rs, "1.1.1.1:11 " + rs},
			p("ns1", "ep1", "p12"):  {"1.1.1.2:12 " + rs},
			p("ns1", "ep1", "p122"): {"1.1.1.2:122 " + rs},
			p("ns3", "ep3", "p33"):  {"3.3.3.3:33 " + rs},
			p("ns4", "ep4", "p44"):  {"4.4.4.4:44 " + lrs},
		},
		expectedConntrack:      true,
		expectedLocalEndpoints: map[types.NamespacedName]int{nsn("ns4", "ep4"): 1},
		expectedChanged:        []types.NamespacedName{nsn("ns1", "ep1"), nsn("ns2", "ep2"), nsn("ns3", "ep3"), nsn("ns4", "ep4")},
		expectedStale: map[ServicePortName][]string{
			p("ns2", "ep2", "p22"): {"2.2.2.22:22", "2.2.2.2:22"},
			p("ns2", "ep2", "p23"): {"2.2.2.3:23"},
			p("ns4", "ep4", "p44"): {"4.4.4.5:44"},
			p("ns4", "ep4", "p45"): {"4.4.4.6:45"},
		},
		expectedGained: []ServicePortName{p("ns1", "ep1", "p12"), p("ns1", "ep1", "p122"), p("ns3", "ep3", "p33")},
	}, {
		name:              "change from 0 endpoint address to 1 unnamed port",
		previous:          []*discovery.EndpointSlice{emptyEndpoint("ns1", "ep1", 1)},
		current:           []*discovery.EndpointSlice{unnamedPort("ns1", "ep1", 1)},
		expectedMap:       map[ServicePortName][]string{p("ns1", "ep1", ""): {"1.1.1.1:11 " + rs}},
		expectedConntrack: true,
		expectedChanged:   []types.NamespacedName{nsn("ns1", "ep1")},
		expectedGained:    []ServicePortName{p("ns1", "ep1", "")},
	}, {
		name:              "change from ready to terminating pod",
		previous:          []*discovery.EndpointSlice{unnamedPortReady("ns1", "ep1", 1)},
		current:           []*discovery.EndpointSlice{unnamedPortTerminating("ns1", "ep1", 1)},
		previousMap:       map[ServicePortName][]string{p("ns1", "ep1", ""): {"1.1.1.1:11 " + rs}},
		expectedMap:       map[ServicePortName][]string{p("ns1", "ep1", ""): {"1.1.1.1:11 serving terminating"}},
		expectedConntrack: true,
		expectedChanged:   []types.NamespacedName{nsn("ns1", "ep1")},
	}, {
		name:              "change from terminating to empty pod",
		previous:          []*discovery.EndpointSlice{unnamedPortTerminating("ns1", "ep1", 1)},
		current:           []*discovery.EndpointSlice{emptyEndpoint("ns1", "ep1", 1)},
		previousMap:       map[ServicePortName][]string{p("ns1", "ep1", ""): {"1.1.1.1:11 serving terminating"}},
		expectedConntrack: true,
		expectedChanged:   []types.NamespacedName{nsn("ns1", "ep1")},
		expectedStale:     map[ServicePortName][]string{p("ns1", "ep1", ""): {"1.1.1.1:11"}},
	}}

	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewState(v1.IPv4Protocol, testNode)
			for _, slice := range tc.previous {
				if slice != nil {
					s.AddEndpointSlice(slice)
				}
			}
			s.Commit()
			checkEndpointMap(t, "previous", allCommittedEndpoints(s), tc.previousMap)

			if len(tc.previous) != len(tc.current) {
				t.Fatalf("previous and current differ in length")
			}
			for i := range tc.previous {
				prev, curr := tc.previous[i], tc.current[i]
				switch {
				case prev == nil && curr == nil:
				case prev == nil:
					s.AddEndpointSlice(curr)
				case curr == nil:
					s.DeleteEndpointSlice(prev)
				default:
					s.UpdateEndpointSlice(prev, curr)
				}
			}
			upd := s.Commit()
			checkEndpointMap(t, "current", allCommittedEndpoints(s), tc.expectedMap)

			if !slices.Equal(upd.UpdatedServices, tc.expectedChanged) {
				t.Errorf("UpdatedServices = %v, want %v", upd.UpdatedServices, tc.expectedChanged)
			}
			if upd.ConntrackCleanupRequired != tc.expectedConntrack {
				t.Errorf("ConntrackCleanupRequired = %v, want %v", upd.ConntrackCleanupRequired, tc.expectedConntrack)
			}
			wantLocal := tc.expectedLocalEndpoints
			if wantLocal == nil {
				wantLocal = map[types.NamespacedName]int{}
			}
			if got := s.LocalReadyEndpoints(); !reflect.DeepEqual(got, wantLocal) {
				t.Errorf("LocalReadyEndpoints = %v, want %v", got, wantLocal)
			}
			// The Update reports local counts for exactly the changed services.
			for _, name := range tc.expectedChanged {
				if upd.LocalReadyEndpoints[name] != wantLocal[name] {
					t.Errorf("Update.LocalReadyEndpoints[%s] = %d, want %d", name, upd.LocalReadyEndpoints[name], wantLocal[name])
				}
			}
			if len(upd.LocalReadyEndpoints) != len(tc.expectedChanged) {
				t.Errorf("Update.LocalReadyEndpoints = %v, want entries for %v", upd.LocalReadyEndpoints, tc.expectedChanged)
			}
			gotStale := map[ServicePortName][]string{}
			for name, eps := range upd.StaleUDPEndpoints {
				gotStale[name] = endpointStrings(eps)
			}
			if tc.expectedStale == nil {
				tc.expectedStale = map[ServicePortName][]string{}
			}
			if !reflect.DeepEqual(gotStale, tc.expectedStale) {
				t.Errorf("StaleUDPEndpoints = %v, want %v", gotStale, tc.expectedStale)
			}
			if !slices.Equal(upd.UDPServicePortsGainedEndpoints, tc.expectedGained) {
				t.Errorf("UDPServicePortsGainedEndpoints = %v, want %v", upd.UDPServicePortsGainedEndpoints, tc.expectedGained)
			}
			// No Service exists, so no view can have changed.
			if !upd.Empty() {
				t.Errorf("Update has view changes %v / %v without Services", upd.Changed, upd.Deleted)
			}
		})
	}
}

func checkEndpointMap(t *testing.T, what string, got, want map[ServicePortName][]string) {
	t.Helper()
	if want == nil {
		want = map[ServicePortName][]string{}
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("%s endpoints:\n got %v\nwant %v", what, got, want)
	}
}

func TestLocalReadyEndpointCount(t *testing.T) {
	e := func(ip string, port int32, isLocal, isReady bool) *Endpoint {
		return &Endpoint{IP: addrs(ip)[0], Port: port, IsLocal: isLocal, Ready: isReady, Serving: true, Terminating: !isReady}
	}
	testCases := []struct {
		name      string
		endpoints map[ServicePortName][]*Endpoint
		expected  int
	}{
		{name: "nothing", endpoints: nil, expected: 0},
		{name: "unnamed port, remote", endpoints: map[ServicePortName][]*Endpoint{
			spn("ns1", "ep1", "", v1.ProtocolTCP): {e("1.1.1.1", 11, false, true)},
		}, expected: 0},
		{name: "unnamed port, local", endpoints: map[ServicePortName][]*Endpoint{
			spn("ns1", "ep1", "", v1.ProtocolTCP): {e("1.1.1.1", 11, true, true)},
		}, expected: 1},
		{name: "named local and non-local ports for the same IP", endpoints: map[ServicePortName][]*Endpoint{
			spn("ns1", "ep1", "p11", v1.ProtocolTCP): {e("1.1.1.1", 11, false, true), e("1.1.1.2", 11, true, true)},
			spn("ns1", "ep1", "p12", v1.ProtocolTCP): {e("1.1.1.1", 12, false, true), e("1.1.1.2", 12, true, true)},
		}, expected: 1},
		{name: "several local IPs over ports", endpoints: map[ServicePortName][]*Endpoint{
			spn("ns2", "ep2", "p22", v1.ProtocolTCP): {e("2.2.2.2", 22, true, true), e("2.2.2.22", 22, true, true)},
			spn("ns2", "ep2", "p23", v1.ProtocolTCP): {e("2.2.2.3", 23, true, true)},
		}, expected: 3},
		{name: "terminating local endpoints do not count", endpoints: map[ServicePortName][]*Endpoint{
			spn("ns2", "ep2", "p22", v1.ProtocolTCP): {e("2.2.2.2", 22, true, true), e("2.2.2.22", 22, true, true)},
			spn("ns2", "ep2", "p23", v1.ProtocolTCP): {e("2.2.2.3", 23, true, false)},
		}, expected: 2},
		{name: "all terminating", endpoints: map[ServicePortName][]*Endpoint{
			spn("ns4", "ep4", "p44", v1.ProtocolTCP): {e("4.4.4.4", 44, true, false), e("4.4.4.5", 44, false, false)},
		}, expected: 0},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			var byPort EndpointsByPort
			for name, eps := range tc.endpoints {
				byPort = append(byPort, PortEndpoints{Name: name, Endpoints: eps})
			}
			if got := countLocalReadyIPs(byPort); got != tc.expected {
				t.Errorf("got %d, want %d", got, tc.expected)
			}
		})
	}
}

func TestLastChangeTriggerTime(t *testing.T) {
	startTime := time.Date(2018, 1, 1, 0, 0, 0, 0, time.UTC)
	tBefore := startTime.Add(-time.Second)
	t0 := startTime.Add(time.Second)
	t1 := t0.Add(time.Second)
	t2 := t1.Add(time.Second)
	t3 := t2.Add(time.Second)

	create := func(ns, name string, trigger time.Time) *discovery.EndpointSlice {
		s := makeSlice(ns, name, name, func(s *discovery.EndpointSlice) {
			s.Endpoints = []discovery.Endpoint{ep("1.1.1.1")}
			s.Ports = []discovery.EndpointPort{slicePort("p11", 11, v1.ProtocolTCP)}
		})
		s.Annotations[v1.EndpointsLastChangeTriggerTime] = trigger.Format(time.RFC3339Nano)
		return s
	}
	modify := func(s *discovery.EndpointSlice, trigger time.Time) *discovery.EndpointSlice {
		m := s.DeepCopy()
		*m.Ports[0].Port++
		m.Annotations[v1.EndpointsLastChangeTriggerTime] = trigger.Format(time.RFC3339Nano)
		return m
	}

	testCases := []struct {
		name     string
		scenario func(s *State)
		expected map[types.NamespacedName][]time.Time
	}{{
		name:     "Single addEndpoints",
		scenario: func(s *State) { s.AddEndpointSlice(create("ns", "ep1", t0)) },
		expected: map[types.NamespacedName][]time.Time{nsn("ns", "ep1"): {t0}},
	}, {
		name: "addEndpoints then updatedEndpoints",
		scenario: func(s *State) {
			e := create("ns", "ep1", t0)
			s.AddEndpointSlice(e)
			s.UpdateEndpointSlice(e, modify(e, t1))
		},
		expected: map[types.NamespacedName][]time.Time{nsn("ns", "ep1"): {t0, t1}},
	}, {
		name: "Add two endpoints then modify one",
		scenario: func(s *State) {
			e1 := create("ns", "ep1", t1)
			s.AddEndpointSlice(e1)
			s.AddEndpointSlice(create("ns", "ep2", t2))
			s.UpdateEndpointSlice(e1, modify(e1, t3))
		},
		expected: map[types.NamespacedName][]time.Time{nsn("ns", "ep1"): {t1, t3}, nsn("ns", "ep2"): {t2}},
	}, {
		name: "Endpoints without annotation set",
		scenario: func(s *State) {
			e := create("ns", "ep1", t1)
			delete(e.Annotations, v1.EndpointsLastChangeTriggerTime)
			s.AddEndpointSlice(e)
		},
		expected: map[types.NamespacedName][]time.Time{},
	}, {
		name:     "Endpoints create before tracker started",
		scenario: func(s *State) { s.AddEndpointSlice(create("ns", "ep1", tBefore)) },
		expected: map[types.NamespacedName][]time.Time{},
	}, {
		name: "addEndpoints then deleteEndpoints",
		scenario: func(s *State) {
			e := create("ns", "ep1", t1)
			s.AddEndpointSlice(e)
			s.DeleteEndpointSlice(e)
		},
		expected: map[types.NamespacedName][]time.Time{},
	}, {
		name: "add then delete then add again",
		scenario: func(s *State) {
			e := create("ns", "ep1", t1)
			s.AddEndpointSlice(e)
			s.DeleteEndpointSlice(e)
			s.AddEndpointSlice(modify(e, t2))
		},
		expected: map[types.NamespacedName][]time.Time{nsn("ns", "ep1"): {t2}},
	}, {
		name:     "delete",
		scenario: func(s *State) { s.DeleteEndpointSlice(create("ns", "ep1", t1)) },
		expected: map[types.NamespacedName][]time.Time{},
	}, {
		name: "unparsable annotation is reported, not recorded",
		scenario: func(s *State) {
			e := create("ns", "ep1", t1)
			e.Annotations[v1.EndpointsLastChangeTriggerTime] = "yesterday"
			s.AddEndpointSlice(e)
		},
		expected: map[types.NamespacedName][]time.Time{},
	}}

	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewState(v1.IPv4Protocol, testNode)
			s.IgnoreTriggerTimesBefore(startTime)
			tc.scenario(s)
			upd := s.Commit()
			if !reflect.DeepEqual(upd.LastChangeTriggerTimes, tc.expected) {
				t.Errorf("LastChangeTriggerTimes = %v, want %v", upd.LastChangeTriggerTimes, tc.expected)
			}
		})
	}
}

// TestEndpointSliceChangeDetection ports upstream's TestEndpointSliceUpdate and
// TestEsDataChanged: whether an event leads to a committed change of the Service.
func TestEndpointSliceChangeDetection(t *testing.T) {
	p := ptr.To[int32]
	hosts12 := []string{"host1", "host2"}
	ports := []*int32{p(80), p(443)}
	fqdn := generateSlice("svc1", "ns1", 2, 2, 5, 999, 999, []string{"host1"}, ports)
	fqdn.AddressType = discovery.AddressTypeFQDN
	port80 := slicePort("http", 80, v1.ProtocolTCP)
	port443 := slicePort("https", 443, v1.ProtocolTCP)
	withPorts := func(ps ...discovery.EndpointPort) *discovery.EndpointSlice {
		return makeSlice("bar", "svc1", "foo", func(s *discovery.EndpointSlice) { s.Ports = ps })
	}
	withEndpoints := func(addrs ...string) *discovery.EndpointSlice {
		s := withPorts(port80, port443)
		for _, a := range addrs {
			s.Endpoints = append(s.Endpoints, ep(a))
		}
		return s
	}

	testCases := []struct {
		name     string
		starting []*discovery.EndpointSlice
		slice    *discovery.EndpointSlice
		remove   bool
		changed  bool
		// expected endpoints of port-0 afterwards, when checked
		port0 []string
	}{{
		name:    "add a simple slice that doesn't already exist",
		slice:   generateSlice("svc1", "ns1", 1, 1, 3, 999, 999, hosts12, ports),
		changed: true,
		port0:   []string{"10.0.1.1:80 ready serving", "10.0.1.2:80 ready serving", "10.0.1.3:80 ready serving"},
	}, {
		name:     "add the same slice that already exists",
		starting: []*discovery.EndpointSlice{generateSlice("svc1", "ns1", 1, 1, 3, 999, 999, hosts12, ports)},
		slice:    generateSlice("svc1", "ns1", 1, 1, 3, 999, 999, hosts12, ports),
	}, {
		name:     "add an FQDN slice (invalid address type)",
		starting: []*discovery.EndpointSlice{generateSlice("svc1", "ns1", 1, 1, 3, 999, 999, hosts12, ports)},
		slice:    fqdn,
	}, {
		name: "add a slice that overlaps with existing state",
		starting: []*discovery.EndpointSlice{
			generateSlice("svc1", "ns1", 1, 1, 3, 999, 999, hosts12, ports),
			generateSlice("svc1", "ns1", 2, 2, 2, 999, 999, hosts12, ports),
		},
		slice:   generateSlice("svc1", "ns1", 1, 1, 5, 999, 999, []string{"host1"}, ports),
		changed: true,
		port0: []string{"10.0.1.1:80 ready serving", "10.0.1.2:80 ready serving", "10.0.1.3:80 ready serving",
			"10.0.1.4:80 ready serving", "10.0.1.5:80 ready serving", "10.0.2.1:80 ready serving", "10.0.2.2:80 ready serving"},
	}, {
		name: "add a slice that overlaps with existing state and partial ports",
		starting: []*discovery.EndpointSlice{
			generateSlice("svc1", "ns1", 1, 1, 3, 999, 999, []string{"host1"}, ports),
			generateSlice("svc1", "ns1", 2, 2, 2, 999, 999, []string{"host1"}, ports),
		},
		slice:   generateSlice("svc1", "ns1", 3, 1, 5, 999, 999, []string{"host1"}, []*int32{p(80)}),
		changed: true,
		port0: []string{"10.0.1.1:80 ready serving", "10.0.1.2:80 ready serving", "10.0.1.3:80 ready serving",
			"10.0.1.4:80 ready serving", "10.0.1.5:80 ready serving", "10.0.2.1:80 ready serving", "10.0.2.2:80 ready serving"},
	}, {
		name: "remove a slice that overlaps with existing state",
		starting: []*discovery.EndpointSlice{
			generateSlice("svc1", "ns1", 1, 1, 3, 999, 999, hosts12, ports),
			generateSlice("svc1", "ns1", 2, 2, 2, 999, 999, hosts12, ports),
		},
		slice:   generateSlice("svc1", "ns1", 1, 1, 5, 999, 999, []string{"host1"}, ports),
		remove:  true,
		changed: true,
		port0:   []string{"10.0.2.1:80 ready serving", "10.0.2.2:80 ready serving"},
	}, {
		name: "remove a slice that doesn't even exist in current state",
		starting: []*discovery.EndpointSlice{
			generateSlice("svc1", "ns1", 1, 1, 5, 999, 999, []string{"host1"}, ports),
			generateSlice("svc1", "ns1", 2, 2, 2, 999, 999, []string{"host1"}, ports),
		},
		slice:  generateSlice("svc1", "ns1", 3, 3, 5, 999, 999, []string{"host1"}, ports),
		remove: true,
	}, {
		name:     "transition all endpoints to unready state",
		starting: []*discovery.EndpointSlice{generateSlice("svc1", "ns1", 1, 1, 3, 999, 999, hosts12, ports)},
		slice:    generateSlice("svc1", "ns1", 1, 1, 3, 1, 999, []string{"host1"}, ports),
		changed:  true,
		port0:    []string{"10.0.1.1:80", "10.0.1.2:80", "10.0.1.3:80"},
	}, {
		name:     "transition all endpoints to ready state",
		starting: []*discovery.EndpointSlice{generateSlice("svc1", "ns1", 1, 1, 2, 1, 999, hosts12, ports)},
		slice:    generateSlice("svc1", "ns1", 1, 1, 2, 999, 999, []string{"host1"}, ports),
		changed:  true,
		port0:    []string{"10.0.1.1:80 ready serving", "10.0.1.2:80 ready serving"},
	}, {
		name: "transition some endpoints to ready state",
		starting: []*discovery.EndpointSlice{
			generateSlice("svc1", "ns1", 1, 1, 3, 2, 999, []string{"host1"}, ports),
			generateSlice("svc1", "ns1", 2, 2, 2, 2, 999, []string{"host1"}, ports),
		},
		slice:   generateSlice("svc1", "ns1", 1, 1, 3, 3, 999, []string{"host1"}, ports),
		changed: true,
		port0:   []string{"10.0.1.1:80 ready serving", "10.0.1.2:80 ready serving", "10.0.1.3:80", "10.0.2.1:80 ready serving", "10.0.2.2:80"},
	}, {
		name: "transition some endpoints to terminating state",
		starting: []*discovery.EndpointSlice{
			generateSlice("svc1", "ns1", 1, 1, 3, 2, 2, []string{"host1"}, ports),
			generateSlice("svc1", "ns1", 2, 2, 2, 2, 2, []string{"host1"}, ports),
		},
		slice:   generateSlice("svc1", "ns1", 1, 1, 3, 3, 2, []string{"host1"}, ports),
		changed: true,
		port0:   []string{"10.0.1.1:80 ready serving", "10.0.1.2:80 serving terminating", "10.0.1.3:80", "10.0.2.1:80 ready serving", "10.0.2.2:80 terminating"},
	}, {
		name:     "identical slices, ports only",
		starting: []*discovery.EndpointSlice{withPorts(port80)},
		slice:    withPorts(port80),
	}, {
		name:     "identical slices, ports out of order",
		starting: []*discovery.EndpointSlice{withPorts(port443, port80)},
		slice:    withPorts(port80, port443),
		changed:  true,
	}, {
		name:     "port removed",
		starting: []*discovery.EndpointSlice{withPorts(port443, port80)},
		slice:    withPorts(port443),
		changed:  true,
	}, {
		name:     "port added",
		starting: []*discovery.EndpointSlice{withPorts(port443)},
		slice:    withPorts(port443, port80),
		changed:  true,
	}, {
		name:     "identical with endpoints",
		starting: []*discovery.EndpointSlice{withEndpoints("10.0.1.0", "10.0.1.1")},
		slice:    withEndpoints("10.0.1.0", "10.0.1.1"),
	}, {
		name:     "identical with endpoints out of order",
		starting: []*discovery.EndpointSlice{withEndpoints("10.0.1.0", "10.0.1.1")},
		slice:    withEndpoints("10.0.1.1", "10.0.1.0"),
		changed:  true,
	}, {
		name:     "identical with endpoint added",
		starting: []*discovery.EndpointSlice{withEndpoints("10.0.1.0")},
		slice:    withEndpoints("10.0.1.0", "10.0.1.1"),
		changed:  true,
	}}

	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewState(v1.IPv4Protocol, "")
			for _, slice := range tc.starting {
				s.AddEndpointSlice(slice)
			}
			s.Commit()
			if tc.remove {
				s.DeleteEndpointSlice(tc.slice)
			} else {
				s.AddEndpointSlice(tc.slice)
			}
			_, pending := s.Pending()
			upd := s.Commit()
			if changed := len(upd.UpdatedServices) > 0; changed != tc.changed || (pending > 0) != tc.changed {
				t.Errorf("changed = %v (pending %d), want %v", changed, pending, tc.changed)
			}
			if tc.port0 != nil {
				got := committedEndpoints(s, spn("ns1", "svc1", "port-0", v1.ProtocolTCP))[spn("ns1", "svc1", "port-0", v1.ProtocolTCP)]
				if !slices.Equal(got, tc.port0) {
					t.Errorf("port-0 endpoints:\n got %q\nwant %q", got, tc.port0)
				}
			}
		})
	}
}

func TestEndpointSliceCacheClearedCorrectly(t *testing.T) {
	mk := func(ns, name string, num int) *discovery.EndpointSlice {
		return testSlice(ns, name, num, []discovery.Endpoint{ep("1.1.1.1", onNode(testNode))}, udp("n1", 11))
	}
	testCases := []struct {
		name   string
		slices []*discovery.EndpointSlice
	}{
		{"one endpoint slice", []*discovery.EndpointSlice{mk("ns1", "ep1", 1)}},
		{"two endpoint slices, same namespace", []*discovery.EndpointSlice{mk("ns1", "ep1", 1), mk("ns1", "ep2", 2)}},
		{"two endpoint slices, same service", []*discovery.EndpointSlice{mk("ns1", "ep1", 1), mk("ns1", "ep1", 2)}},
		{"two endpoint slices, different namespace", []*discovery.EndpointSlice{mk("ns1", "ep1", 1), mk("ns2", "ep1", 2)}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewState(v1.IPv4Protocol, testNode)
			for _, slice := range tc.slices {
				s.AddEndpointSlice(slice)
			}
			s.Commit()
			for _, slice := range tc.slices {
				s.DeleteEndpointSlice(slice)
			}
			s.Commit()
			if len(s.appliedSlices) != 0 || len(s.services) != 0 || len(s.pendingSlices) != 0 {
				t.Errorf("state not cleared: applied %v, services %v, pending %v", s.appliedSlices, s.services, s.pendingSlices)
			}
		})
	}

	// Deleting one of two slices of a Service keeps the other.
	s := NewState(v1.IPv4Protocol, testNode)
	a, b := mk("ns1", "svc1", 1), mk("ns1", "svc1", 2)
	s.AddEndpointSlice(a)
	s.AddEndpointSlice(b)
	s.Commit()
	s.DeleteEndpointSlice(a)
	s.Commit()
	if len(s.appliedSlices) != 1 || len(s.appliedSlices[nsn("ns1", "svc1")]) != 1 {
		t.Errorf("applied slices = %v, want one", s.appliedSlices)
	}
}
