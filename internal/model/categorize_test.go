package model

import (
	"net/netip"
	"slices"
	"testing"
)

// tep builds a test Endpoint from "ip:port" and options.
func tep(addrPort string, opts ...func(*Endpoint)) *Endpoint {
	ap := netip.MustParseAddrPort(addrPort)
	e := &Endpoint{IP: ap.Addr(), Port: int32(ap.Port())}
	for _, o := range opts {
		o(e)
	}
	return e
}

func ready(e *Endpoint)       { e.Ready, e.Serving = true, true }
func local(e *Endpoint)       { e.IsLocal = true }
func servingTerm(e *Endpoint) { e.Serving, e.Terminating = true, true }
func notServing(e *Endpoint)  { e.Serving = false }
func zh(zones ...string) func(*Endpoint) {
	return func(e *Endpoint) { e.Hints = withHints(e.Hints, zones, nil) }
}
func nh(nodes ...string) func(*Endpoint) {
	return func(e *Endpoint) { e.Hints = withHints(e.Hints, nil, nodes) }
}

func TestCategorizeEndpoints(t *testing.T) {
	testCases := []struct {
		name      string
		nodeName  string
		zone      string
		port      ServicePort
		endpoints []*Endpoint

		// nil means "this kind of traffic is not used"; []string{} means used but
		// no endpoints. allEndpoints may be omitted when it equals the only non-empty
		// one of the two lists (as in upstream's table).
		clusterEndpoints    []string
		localEndpoints      []string
		allEndpoints        []string
		onlyRemoteEndpoints bool
	}{{
		name: "should use topology since all endpoints have hints, node has a zone label and and there are endpoints for the node's zone",
		zone: "zone-a",
		endpoints: []*Endpoint{
			tep("10.1.2.3:80", zh("zone-a"), ready),
			tep("10.1.2.4:80", zh("zone-b"), ready),
			tep("10.1.2.5:80", zh("zone-c"), ready),
			tep("10.1.2.6:80", zh("zone-a"), ready),
		},
		clusterEndpoints: []string{"10.1.2.3:80", "10.1.2.6:80"},
	}, {
		name: "externalTrafficPolicy: Local, topology ignored for Local endpoints",
		zone: "zone-a",
		port: ServicePort{ExternalPolicyLocal: true, NodePort: 8080},
		endpoints: []*Endpoint{
			tep("10.1.2.3:80", zh("zone-a"), ready, local),
			tep("10.1.2.4:80", zh("zone-b"), ready, local),
			tep("10.1.2.5:80", zh("zone-c"), ready),
			tep("10.1.2.6:80", zh("zone-a"), ready),
		},
		clusterEndpoints: []string{"10.1.2.3:80", "10.1.2.6:80"},
		localEndpoints:   []string{"10.1.2.3:80", "10.1.2.4:80"},
		allEndpoints:     []string{"10.1.2.3:80", "10.1.2.4:80", "10.1.2.6:80"},
	}, {
		name: "internalTrafficPolicy: Local, topology ignored for Local endpoints",
		zone: "zone-a",
		port: ServicePort{InternalPolicyLocal: true, NodePort: 8080},
		endpoints: []*Endpoint{
			tep("10.1.2.3:80", zh("zone-a"), ready, local),
			tep("10.1.2.4:80", zh("zone-b"), ready, local),
			tep("10.1.2.5:80", zh("zone-c"), ready),
			tep("10.1.2.6:80", zh("zone-a"), ready),
		},
		clusterEndpoints: []string{"10.1.2.3:80", "10.1.2.6:80"},
		localEndpoints:   []string{"10.1.2.3:80", "10.1.2.4:80"},
		allEndpoints:     []string{"10.1.2.3:80", "10.1.2.4:80", "10.1.2.6:80"},
	}, {
		name:             "empty node labels",
		endpoints:        []*Endpoint{tep("10.1.2.3:80", zh("zone-a"), ready)},
		clusterEndpoints: []string{"10.1.2.3:80"},
	}, {
		name:             "empty zone label",
		zone:             "",
		endpoints:        []*Endpoint{tep("10.1.2.3:80", zh("zone-a"), ready)},
		clusterEndpoints: []string{"10.1.2.3:80"},
	}, {
		name:             "node in different zone, no endpoint filtering",
		zone:             "zone-b",
		endpoints:        []*Endpoint{tep("10.1.2.3:80", zh("zone-a"), ready)},
		clusterEndpoints: []string{"10.1.2.3:80"},
	}, {
		name: "unready endpoint",
		zone: "zone-a",
		endpoints: []*Endpoint{
			tep("10.1.2.3:80", zh("zone-a"), ready),
			tep("10.1.2.4:80", zh("zone-b"), ready),
			tep("10.1.2.5:80", zh("zone-c"), ready),
			tep("10.1.2.6:80", zh("zone-a")),
		},
		clusterEndpoints: []string{"10.1.2.3:80"},
	}, {
		name: "only unready endpoints in same zone (should not filter)",
		zone: "zone-a",
		endpoints: []*Endpoint{
			tep("10.1.2.3:80", zh("zone-a")),
			tep("10.1.2.4:80", zh("zone-b"), ready),
			tep("10.1.2.5:80", zh("zone-c"), ready),
			tep("10.1.2.6:80", zh("zone-a")),
		},
		clusterEndpoints: []string{"10.1.2.4:80", "10.1.2.5:80"},
	}, {
		name: "missing hints, no filtering applied",
		zone: "zone-a",
		endpoints: []*Endpoint{
			tep("10.1.2.3:80", zh("zone-a"), ready),
			tep("10.1.2.4:80", zh("zone-b"), ready),
			tep("10.1.2.5:80", ready),
			tep("10.1.2.6:80", zh("zone-a"), ready),
		},
		clusterEndpoints: []string{"10.1.2.3:80", "10.1.2.4:80", "10.1.2.5:80", "10.1.2.6:80"},
	}, {
		name: "multiple hints per endpoint, filtering includes any endpoint with zone included",
		zone: "zone-c",
		endpoints: []*Endpoint{
			tep("10.1.2.3:80", zh("zone-a", "zone-b", "zone-c"), ready),
			tep("10.1.2.4:80", zh("zone-b", "zone-c"), ready),
			tep("10.1.2.5:80", zh("zone-b", "zone-d"), ready),
			tep("10.1.2.6:80", zh("zone-c"), ready),
		},
		clusterEndpoints: []string{"10.1.2.3:80", "10.1.2.4:80", "10.1.2.6:80"},
	}, {
		// Upstream also has a "feature gate disabled" variant; the gate is GA and
		// locked on in v1.37, so only the enabled behaviour exists.
		name:     "PreferSameNode available",
		nodeName: "node-1",
		zone:     "zone-a",
		endpoints: []*Endpoint{
			tep("10.1.2.3:80", zh("zone-a"), nh("node-1"), ready),
			tep("10.1.2.4:80", zh("zone-b"), nh("node-2"), ready),
			tep("10.1.2.5:80", zh("zone-c"), nh("node-3"), ready),
			tep("10.1.2.6:80", zh("zone-a"), nh("node-4"), ready),
		},
		clusterEndpoints: []string{"10.1.2.3:80"},
	}, {
		name:     "PreferSameNode ignored if some endpoints unhinted",
		nodeName: "node-1",
		zone:     "zone-a",
		endpoints: []*Endpoint{
			tep("10.1.2.3:80", zh("zone-a"), nh("node-1"), ready),
			tep("10.1.2.4:80", ready),
			tep("10.1.2.5:80", zh("zone-c"), nh("node-3"), ready),
			tep("10.1.2.6:80", zh("zone-a"), nh("node-4"), ready),
		},
		clusterEndpoints: []string{"10.1.2.3:80", "10.1.2.4:80", "10.1.2.5:80", "10.1.2.6:80"},
	}, {
		name:     "PreferSameNode falls back to PreferSameZone if no endpoint for node",
		nodeName: "node-0",
		zone:     "zone-a",
		endpoints: []*Endpoint{
			tep("10.1.2.3:80", zh("zone-a"), nh("node-1"), ready),
			tep("10.1.2.4:80", zh("zone-b"), nh("node-2"), ready),
			tep("10.1.2.5:80", zh("zone-c"), nh("node-3"), ready),
			tep("10.1.2.6:80", zh("zone-a"), nh("node-4"), ready),
		},
		clusterEndpoints: []string{"10.1.2.3:80", "10.1.2.6:80"},
	}, {
		name:     "node hints on unready endpoints do not count",
		nodeName: "node-1",
		zone:     "zone-a",
		endpoints: []*Endpoint{
			tep("10.1.2.3:80", zh("zone-a"), nh("node-1")),
			tep("10.1.2.4:80", zh("zone-a"), nh("node-2"), ready),
			tep("10.1.2.5:80", zh("zone-b"), nh("node-3"), ready),
		},
		clusterEndpoints: []string{"10.1.2.4:80"},
	}, {
		name: "conflicting topology and localness require merging allEndpoints",
		zone: "zone-a",
		port: ServicePort{ExternalPolicyLocal: true, NodePort: 8080},
		endpoints: []*Endpoint{
			tep("10.0.0.0:80", zh("zone-a"), ready, local),
			tep("10.0.0.1:80", zh("zone-b"), ready, local),
			tep("10.0.0.2:80", zh("zone-a"), ready),
			tep("10.0.0.3:80", zh("zone-b"), ready),
		},
		clusterEndpoints: []string{"10.0.0.0:80", "10.0.0.2:80"},
		localEndpoints:   []string{"10.0.0.0:80", "10.0.0.1:80"},
		allEndpoints:     []string{"10.0.0.0:80", "10.0.0.1:80", "10.0.0.2:80"},
	}, {
		name:           "internalTrafficPolicy: Local, with empty endpoints",
		port:           ServicePort{InternalPolicyLocal: true},
		endpoints:      []*Endpoint{},
		localEndpoints: []string{},
	}, {
		name: "internalTrafficPolicy: Local, but all endpoints are remote",
		port: ServicePort{InternalPolicyLocal: true},
		endpoints: []*Endpoint{
			tep("10.0.0.0:80", ready),
			tep("10.0.0.1:80", ready),
		},
		localEndpoints:      []string{},
		onlyRemoteEndpoints: true,
	}, {
		name: "internalTrafficPolicy: Local, all endpoints are local",
		port: ServicePort{InternalPolicyLocal: true},
		endpoints: []*Endpoint{
			tep("10.0.0.0:80", ready, local),
			tep("10.0.0.1:80", ready, local),
		},
		localEndpoints: []string{"10.0.0.0:80", "10.0.0.1:80"},
	}, {
		name: "internalTrafficPolicy: Local, some endpoints are local",
		port: ServicePort{InternalPolicyLocal: true},
		endpoints: []*Endpoint{
			tep("10.0.0.0:80", ready, local),
			tep("10.0.0.1:80", ready),
		},
		localEndpoints: []string{"10.0.0.0:80"},
	}, {
		name: "Cluster traffic policy, endpoints not Ready",
		endpoints: []*Endpoint{
			tep("10.0.0.0:80"),
			tep("10.0.0.1:80"),
		},
		clusterEndpoints: []string{},
	}, {
		name: "Cluster traffic policy, some endpoints are Ready",
		endpoints: []*Endpoint{
			tep("10.0.0.0:80"),
			tep("10.0.0.1:80", ready),
		},
		clusterEndpoints: []string{"10.0.0.1:80"},
	}, {
		name: "Cluster traffic policy, all endpoints are terminating",
		endpoints: []*Endpoint{
			tep("10.0.0.0:80", servingTerm, local),
			tep("10.0.0.1:80", servingTerm),
		},
		clusterEndpoints: []string{"10.0.0.0:80", "10.0.0.1:80"},
	}, {
		name: "iTP: Local, eTP: Cluster, some endpoints local",
		port: ServicePort{InternalPolicyLocal: true, NodePort: 8080},
		endpoints: []*Endpoint{
			tep("10.0.0.0:80", ready, local),
			tep("10.0.0.1:80", ready),
		},
		clusterEndpoints: []string{"10.0.0.0:80", "10.0.0.1:80"},
		localEndpoints:   []string{"10.0.0.0:80"},
		allEndpoints:     []string{"10.0.0.0:80", "10.0.0.1:80"},
	}, {
		name: "iTP: Cluster, eTP: Local, some endpoints local",
		port: ServicePort{ExternalPolicyLocal: true, NodePort: 8080},
		endpoints: []*Endpoint{
			tep("10.0.0.0:80", ready, local),
			tep("10.0.0.1:80", ready),
		},
		clusterEndpoints: []string{"10.0.0.0:80", "10.0.0.1:80"},
		localEndpoints:   []string{"10.0.0.0:80"},
		allEndpoints:     []string{"10.0.0.0:80", "10.0.0.1:80"},
	}, {
		name: "iTP: Local, eTP: Local, some endpoints local",
		port: ServicePort{InternalPolicyLocal: true, ExternalPolicyLocal: true, NodePort: 8080},
		endpoints: []*Endpoint{
			tep("10.0.0.0:80", ready, local),
			tep("10.0.0.1:80", ready),
		},
		clusterEndpoints: []string{"10.0.0.0:80", "10.0.0.1:80"},
		localEndpoints:   []string{"10.0.0.0:80"},
		allEndpoints:     []string{"10.0.0.0:80", "10.0.0.1:80"},
	}, {
		name: "iTP: Local, eTP: Local, all endpoints remote",
		port: ServicePort{InternalPolicyLocal: true, ExternalPolicyLocal: true, NodePort: 8080},
		endpoints: []*Endpoint{
			tep("10.0.0.0:80", ready),
			tep("10.0.0.1:80", ready),
		},
		clusterEndpoints: []string{"10.0.0.0:80", "10.0.0.1:80"},
		localEndpoints:   []string{},
		allEndpoints:     []string{"10.0.0.0:80", "10.0.0.1:80"},
	}, {
		name: "iTP: Local, eTP: Local, all endpoints remote and terminating",
		port: ServicePort{InternalPolicyLocal: true, ExternalPolicyLocal: true, NodePort: 8080},
		endpoints: []*Endpoint{
			tep("10.0.0.0:80", servingTerm),
			tep("10.0.0.1:80", servingTerm),
		},
		clusterEndpoints:    []string{"10.0.0.0:80", "10.0.0.1:80"},
		localEndpoints:      []string{},
		allEndpoints:        []string{"10.0.0.0:80", "10.0.0.1:80"},
		onlyRemoteEndpoints: true,
	}, {
		name: "iTP: Cluster, eTP: Local, with terminating endpoints",
		port: ServicePort{ExternalPolicyLocal: true, NodePort: 8080},
		endpoints: []*Endpoint{
			tep("10.0.0.0:80", ready),
			tep("10.0.0.1:80", notServing, local),
			tep("10.0.0.2:80", servingTerm, local),
			tep("10.0.0.3:80", servingTerm),
		},
		clusterEndpoints: []string{"10.0.0.0:80"},
		localEndpoints:   []string{"10.0.0.2:80"},
		allEndpoints:     []string{"10.0.0.0:80", "10.0.0.2:80"},
	}, {
		name: "externalTrafficPolicy ignored if not externally accessible",
		port: ServicePort{ExternalPolicyLocal: true},
		endpoints: []*Endpoint{
			tep("10.0.0.0:80", ready),
			tep("10.0.0.1:80", ready, local),
		},
		clusterEndpoints: []string{"10.0.0.0:80", "10.0.0.1:80"},
		allEndpoints:     []string{"10.0.0.0:80", "10.0.0.1:80"},
	}, {
		name: "no cluster endpoints for iTP:Local internal-only service",
		port: ServicePort{InternalPolicyLocal: true},
		endpoints: []*Endpoint{
			tep("10.0.0.0:80", ready),
			tep("10.0.0.1:80", ready, local),
		},
		localEndpoints: []string{"10.0.0.1:80"},
		allEndpoints:   []string{"10.0.0.1:80"},
	}, {
		name:             "empty endpoints when no service endpoints exist",
		endpoints:        nil,
		clusterEndpoints: []string{},
	}, {
		name:             "no endpoints, both policies in use",
		port:             ServicePort{ExternalPolicyLocal: true, NodePort: 30000},
		clusterEndpoints: []string{},
		localEndpoints:   []string{},
		allEndpoints:     []string{},
	}, {
		name:             "single endpoint not ready, not serving, not terminating",
		zone:             "zone-a",
		endpoints:        []*Endpoint{tep("10.0.0.0:80", notServing)},
		clusterEndpoints: []string{},
	}, {
		name: "serving but not terminating endpoints are not a fallback",
		endpoints: []*Endpoint{
			tep("10.0.0.0:80", func(e *Endpoint) { e.Serving = true }),
		},
		clusterEndpoints: []string{},
	}, {
		name: "eTP Local on an externalIP service uses local endpoints",
		port: ServicePort{ExternalPolicyLocal: true, ExternalIPs: addrs("1.2.3.4")},
		endpoints: []*Endpoint{
			tep("10.0.0.0:80", ready),
			tep("10.0.0.1:80", ready, local),
		},
		clusterEndpoints: []string{"10.0.0.0:80", "10.0.0.1:80"},
		localEndpoints:   []string{"10.0.0.1:80"},
		allEndpoints:     []string{"10.0.0.0:80", "10.0.0.1:80"},
	}}

	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			port := tc.port
			view := CategorizeEndpoints(tc.endpoints, &port, tc.nodeName, tc.zone)
			if view.ServicePort != &port {
				t.Errorf("view does not point at its ServicePort")
			}
			checkList(t, "cluster", tc.clusterEndpoints, view.ClusterEndpoints)
			checkList(t, "local", tc.localEndpoints, view.LocalEndpoints)

			wantAll := tc.allEndpoints
			if wantAll == nil {
				switch {
				case len(tc.clusterEndpoints) != 0 && len(tc.localEndpoints) == 0:
					wantAll = tc.clusterEndpoints
				case len(tc.localEndpoints) != 0 && len(tc.clusterEndpoints) == 0:
					wantAll = tc.localEndpoints
				case tc.clusterEndpoints != nil:
					wantAll = tc.clusterEndpoints
				default:
					wantAll = tc.localEndpoints
				}
			}
			checkList(t, "allReachable", wantAll, view.AllReachableEndpoints)

			wantAny := len(wantAll) > 0 || tc.onlyRemoteEndpoints
			if view.HasAnyEndpoints != wantAny {
				t.Errorf("HasAnyEndpoints = %v, want %v", view.HasAnyEndpoints, wantAny)
			}
		})
	}
}

func checkList(t *testing.T, what string, want []string, got []*Endpoint) {
	t.Helper()
	if (want == nil) != (got == nil) || !slices.Equal(want, endpointStrings(got)) {
		t.Errorf("%s endpoints = %#v, want %#v", what, endpointStrings(got), want)
	}
}

// withHints returns h with the zone and/or node hints given (non-nil) set.
func withHints(h *EndpointHints, zones, nodes []string) *EndpointHints {
	out := EndpointHints{}
	if h != nil {
		out = *h
	}
	if zones != nil {
		out.Zones = zones
	}
	if nodes != nil {
		out.Nodes = nodes
	}
	return &out
}
