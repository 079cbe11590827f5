package model

import (
	"net/netip"
	"testing"
)

func TestDecideRouting(t *testing.T) {
	clusterIPOnly := &ServicePort{ClusterIP: netip.MustParseAddr("172.30.0.1"), Port: 80}
	nodePort := &ServicePort{ClusterIP: netip.MustParseAddr("172.30.0.1"), Port: 80, NodePort: 30080}
	etpLocal := &ServicePort{ClusterIP: netip.MustParseAddr("172.30.0.1"), Port: 80, NodePort: 30080, ExternalPolicyLocal: true}
	itpLocal := &ServicePort{ClusterIP: netip.MustParseAddr("172.30.0.1"), Port: 80, InternalPolicyLocal: true}
	itpLocalNodePort := &ServicePort{ClusterIP: netip.MustParseAddr("172.30.0.1"), Port: 80, NodePort: 30080, InternalPolicyLocal: true}

	tests := []struct {
		name           string
		sp             *ServicePort
		any            bool
		cluster, local int
		want           Routing
	}{
		{"no endpoints anywhere: everything rejected", nodePort, false, 0, 0,
			Routing{MasqueradeExternal: true, RejectUnserved: true}},
		{"ClusterIP with endpoints", clusterIPOnly, true, 2, 0,
			Routing{ClusterSelection: true, InternalServed: true, ExternalServed: true, MasqueradeExternal: true}},
		{"NodePort, eTP Cluster: masqueraded external entry", nodePort, true, 2, 0,
			Routing{ClusterSelection: true, InternalServed: true, ExternalServed: true, ExternalEntry: true, MasqueradeExternal: true}},
		{"eTP Local with local endpoints: short-circuit, external served locally", etpLocal, true, 2, 1,
			Routing{ClusterSelection: true, LocalSelection: true, ExternalLocal: true, InternalServed: true, ExternalServed: true,
				ExternalEntry: true, ShortCircuitLocal: true}},
		{"eTP Local without local endpoints: external dropped, entry still short-circuits", etpLocal, true, 2, 0,
			Routing{ClusterSelection: true, ExternalLocal: true, InternalServed: true, ExternalEntry: true, ShortCircuitLocal: true}},
		{"iTP Local without local endpoints: internal dropped", itpLocal, true, 0, 0,
			Routing{InternalLocal: true, MasqueradeExternal: true}},
		{"iTP Local with a NodePort: cluster selection for external traffic", itpLocalNodePort, true, 3, 1,
			Routing{ClusterSelection: true, LocalSelection: true, InternalLocal: true, InternalServed: true, ExternalServed: true,
				ExternalEntry: true, MasqueradeExternal: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := DecideRouting(tc.sp, tc.any, tc.cluster, tc.local); got != tc.want {
				t.Errorf("DecideRouting =\n %+v\nwant\n %+v", got, tc.want)
			}
		})
	}
}
