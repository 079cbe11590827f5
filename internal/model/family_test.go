package model

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestEndpointsInFamily(t *testing.T) {
	ep := func(s string) *Endpoint { return &Endpoint{IP: netip.MustParseAddr(s), Port: 80} }
	v4a, v4b, v6, mapped := ep("10.0.0.1"), ep("10.0.0.2"), ep("fd00::1"), ep("::ffff:10.0.0.3")
	all := []*Endpoint{v4a, v4b}
	if got := EndpointsInFamily(all, v1.IPv4Protocol); &got[0] != &all[0] || len(got) != 2 {
		t.Errorf("all IPv4: got a copy or another list %v", got)
	}
	mixed := []*Endpoint{v4a, v6, nil, mapped, v4b}
	if got := EndpointsInFamily(mixed, v1.IPv4Protocol); len(got) != 2 || got[0] != v4a || got[1] != v4b {
		t.Errorf("IPv4 of mixed = %v", got)
	}
	if got := EndpointsInFamily(mixed, v1.IPv6Protocol); len(got) != 1 || got[0] != v6 {
		t.Errorf("IPv6 of mixed = %v", got)
	}
	if mixed[1] != v6 {
		t.Errorf("input changed")
	}
}
