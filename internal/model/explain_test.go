package model

import (
	"fmt"
	"strings"
	"testing"
)

// TestExplainEndpoints checks every Exclusion against the selections
// CategorizeEndpoints makes: each case lists, per endpoint, its Cluster, Local,
// Internal, External and ExternalFromNode reasons ("-" for Selected).
func TestExplainEndpoints(t *testing.T) {
	testCases := []struct {
		name      string
		zone      string
		port      ServicePort
		endpoints []*Endpoint
		want      []string // "ip:port cluster local internal external externalFromNode"
	}{{
		name: "ClusterIP only: not ready, terminating with ready peers",
		endpoints: []*Endpoint{
			tep("10.0.0.1:80", ready),
			tep("10.0.0.2:80", servingTerm),
			tep("10.0.0.3:80", notServing),
			tep("10.0.0.4:80", func(e *Endpoint) { e.Serving = true }),
		},
		want: []string{
			"10.0.0.1:80 - PolicyUnused - NotExternallyAccessible NotExternallyAccessible",
			"10.0.0.2:80 TerminatingWithReadyEndpoints PolicyUnused TerminatingWithReadyEndpoints NotExternallyAccessible NotExternallyAccessible",
			"10.0.0.3:80 NotReady PolicyUnused NotReady NotExternallyAccessible NotExternallyAccessible",
			"10.0.0.4:80 ServingButNotReady PolicyUnused ServingButNotReady NotExternallyAccessible NotExternallyAccessible",
		},
	}, {
		name: "terminating fallback: no ready endpoint anywhere",
		endpoints: []*Endpoint{
			tep("10.0.0.1:80", servingTerm),
			tep("10.0.0.2:80", notServing),
		},
		want: []string{
			"10.0.0.1:80 - PolicyUnused - NotExternallyAccessible NotExternallyAccessible",
			"10.0.0.2:80 NotReady PolicyUnused NotReady NotExternallyAccessible NotExternallyAccessible",
		},
	}, {
		name: "zone hints in force",
		zone: "zone-a",
		endpoints: []*Endpoint{
			tep("10.0.0.1:80", zh("zone-a"), ready),
			tep("10.0.0.2:80", zh("zone-b"), ready),
		},
		want: []string{
			"10.0.0.1:80 - PolicyUnused - NotExternallyAccessible NotExternallyAccessible",
			"10.0.0.2:80 HintsForOtherZone PolicyUnused HintsForOtherZone NotExternallyAccessible NotExternallyAccessible",
		},
	}, {
		name: "node hints in force",
		zone: "zone-a",
		endpoints: []*Endpoint{
			tep("10.0.0.1:80", nh(testNode), zh("zone-a"), ready),
			tep("10.0.0.2:80", nh("other"), zh("zone-a"), ready),
		},
		want: []string{
			"10.0.0.1:80 - PolicyUnused - NotExternallyAccessible NotExternallyAccessible",
			"10.0.0.2:80 HintsForOtherNode PolicyUnused HintsForOtherNode NotExternallyAccessible NotExternallyAccessible",
		},
	}, {
		name: "internalTrafficPolicy Local, no external entry",
		port: ServicePort{InternalPolicyLocal: true},
		endpoints: []*Endpoint{
			tep("10.0.0.1:80", ready, local),
			tep("10.0.0.2:80", ready),
			tep("10.0.0.3:80", servingTerm, local),
		},
		want: []string{
			"10.0.0.1:80 PolicyUnused - - NotExternallyAccessible NotExternallyAccessible",
			"10.0.0.2:80 PolicyUnused NotOnThisNode NotOnThisNode NotExternallyAccessible NotExternallyAccessible",
			"10.0.0.3:80 PolicyUnused TerminatingWithReadyEndpoints TerminatingWithReadyEndpoints NotExternallyAccessible NotExternallyAccessible",
		},
	}, {
		name: "externalTrafficPolicy Local with a NodePort: external traffic from the node short-circuits",
		port: ServicePort{ExternalPolicyLocal: true, NodePort: 30080},
		endpoints: []*Endpoint{
			tep("10.0.0.1:80", ready, local),
			tep("10.0.0.2:80", ready),
		},
		want: []string{
			"10.0.0.1:80 - - - - -",
			"10.0.0.2:80 - NotOnThisNode - NotOnThisNode -",
		},
	}, {
		name: "externalTrafficPolicy Local, only a terminating local endpoint: Local falls back, Cluster does not",
		port: ServicePort{ExternalPolicyLocal: true, NodePort: 30080},
		endpoints: []*Endpoint{
			tep("10.0.0.1:80", servingTerm, local),
			tep("10.0.0.2:80", ready),
		},
		want: []string{
			"10.0.0.1:80 TerminatingWithReadyEndpoints - TerminatingWithReadyEndpoints - TerminatingWithReadyEndpoints",
			"10.0.0.2:80 - NotOnThisNode - NotOnThisNode -",
		},
	}, {
		name: "externalTrafficPolicy Cluster with a NodePort",
		port: ServicePort{NodePort: 30080},
		endpoints: []*Endpoint{
			tep("10.0.0.1:80", ready),
			tep("10.0.0.2:80", notServing, local),
		},
		want: []string{
			"10.0.0.1:80 - PolicyUnused - - -",
			"10.0.0.2:80 NotReady PolicyUnused NotReady NotReady NotReady",
		},
	}}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			port := tc.port
			view := CategorizeEndpoints(tc.endpoints, &port, testNode, tc.zone)
			var got []string
			for _, use := range ExplainEndpoints(view, tc.endpoints, testNode, tc.zone) {
				got = append(got, fmt.Sprintf("%s %s %s %s %s %s", use.Endpoint,
					dash(use.Cluster), dash(use.Local), dash(use.Internal), dash(use.External), dash(use.ExternalFromNode)))
				checkAgainstView(t, view, use)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("ExplainEndpoints:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tc.want, "\n     "))
			}
		})
	}
}

// checkAgainstView asserts that an explanation says Selected exactly for the
// endpoints the view's lists hold.
func checkAgainstView(t *testing.T, view *ServicePortView, use EndpointUse) {
	t.Helper()
	in := func(list []*Endpoint) bool { return membership(list)[use.Endpoint] }
	if (use.Cluster == Selected) != in(view.ClusterEndpoints) {
		t.Errorf("%s: Cluster %q but in ClusterEndpoints = %v", use.Endpoint, use.Cluster, in(view.ClusterEndpoints))
	}
	if (use.Local == Selected) != in(view.LocalEndpoints) {
		t.Errorf("%s: Local %q but in LocalEndpoints = %v", use.Endpoint, use.Local, in(view.LocalEndpoints))
	}
}

func dash(e Exclusion) string {
	if e == Selected {
		return "-"
	}
	return string(e)
}
