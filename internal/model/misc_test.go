package model

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

func TestSliceAttributionProblems(t *testing.T) {
	s := NewState(v1.IPv4Protocol, testNode)
	noLabel := httpSlice("ns", "svc", "orphan", ep("10.0.0.1"))
	delete(noLabel.Labels, discovery.LabelServiceName)
	s.AddEndpointSlice(noLabel)
	noNamespace := httpSlice("", "svc", "x", ep("10.0.0.1"))
	s.AddEndpointSlice(noNamespace)
	otherFamily := httpSlice("ns", "svc", "v6", ep("fd00::1"))
	otherFamily.AddressType = discovery.AddressTypeIPv6
	s.AddEndpointSlice(otherFamily)
	fqdn := httpSlice("ns", "svc", "fqdn", ep("example.com"))
	fqdn.AddressType = discovery.AddressTypeFQDN
	s.AddEndpointSlice(fqdn)
	s.AddEndpointSlice(nil)
	s.OnServiceAdd(nil)
	s.OnServiceUpdate(nil, nil)

	upd := s.Commit()
	if len(upd.Problems) != 2 || !strings.Contains(upd.Problems[0].Error(), discovery.LabelServiceName) ||
		!strings.Contains(upd.Problems[1].Error(), "no namespace") {
		t.Errorf("problems = %v", upd.Problems)
	}
	if upd.EndpointSliceEvents != 0 || len(upd.UpdatedServices) != 0 || len(s.appliedSlices) != 0 {
		t.Errorf("ignored slices were recorded: %+v", upd)
	}
}

func TestReadsOfUnknownNames(t *testing.T) {
	s := NewState(v1.IPv4Protocol, testNode)
	name := spn("ns", "nope", "http", v1.ProtocolTCP)
	if s.View(name) != nil || s.Endpoints(name) != nil || len(s.ServicePortNames()) != 0 {
		t.Errorf("unknown name resolved")
	}
	for range s.Views() {
		t.Errorf("empty state yielded a view")
	}
	s.OnServiceAdd(clusterIPService("ns", "a", "10.96.0.1"))
	s.OnServiceAdd(clusterIPService("ns", "b", "10.96.0.2"))
	s.Commit()
	n := 0
	for range s.Views() {
		n++
		break
	}
	if n != 1 {
		t.Errorf("early break ignored")
	}
}

func TestNamesAndStrings(t *testing.T) {
	if got := spn("ns", "svc", "http", v1.ProtocolTCP).String(); got != "ns/svc:http" {
		t.Errorf("String = %q", got)
	}
	if got := spn("ns", "svc", "", v1.ProtocolTCP).String(); got != "ns/svc" {
		t.Errorf("String = %q", got)
	}
	names := []ServicePortName{
		spn("b", "a", "", v1.ProtocolTCP),
		spn("a", "b", "", v1.ProtocolTCP),
		spn("a", "a", "y", v1.ProtocolTCP),
		spn("a", "a", "x", v1.ProtocolUDP),
		spn("a", "a", "x", v1.ProtocolTCP),
	}
	for i := 1; i < len(names); i++ {
		if CompareServicePortNames(names[i], names[i-1]) >= 0 || CompareServicePortNames(names[i-1], names[i]) <= 0 {
			t.Errorf("order of %v and %v", names[i], names[i-1])
		}
	}
	if CompareServicePortNames(names[0], names[0]) != 0 {
		t.Errorf("not reflexive")
	}
	p := &ServicePort{StickyMaxAgeSeconds: 10}
	if !p.SessionAffinity() {
		t.Errorf("SessionAffinity")
	}
	e := DataError{Kind: "Service", Object: nsn("ns", "x"), Field: "f", Reason: "r"}
	if e.Error() != "Service ns/x: f: r" {
		t.Errorf("Error() = %q", e.Error())
	}
}

func TestSloppyParsing(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"1.2.3.4", "1.2.3.4"},
		{"001.002.003.004", "1.2.3.4"},
		{"::ffff:1.2.3.4", "1.2.3.4"},
		{"fd00::1", "fd00::1"},
	} {
		a, ok := parseAddr(tc.in)
		if !ok || a.String() != tc.want {
			t.Errorf("parseAddr(%q) = %v %v, want %s", tc.in, a, ok, tc.want)
		}
	}
	if _, ok := parseAddr("1.2.3"); ok {
		t.Errorf("parsed a bad address")
	}
	for _, tc := range []struct{ in, want string }{
		{"10.1.2.3/8", "10.0.0.0/8"},
		{"010.1.2.3/16", "10.1.0.0/16"},
		{"::ffff:1.2.3.0/120", "1.2.3.0/24"},
		{"fd00::1/64", "fd00::/64"},
		{"0.0.0.0/0", "0.0.0.0/0"},
	} {
		p, ok := parsePrefix(tc.in)
		if !ok || p.String() != tc.want {
			t.Errorf("parsePrefix(%q) = %v %v, want %s", tc.in, p, ok, tc.want)
		}
	}
	if _, ok := parsePrefix("10.0.0.0"); ok {
		t.Errorf("parsed a CIDR without length")
	}
}

func TestViewEquality(t *testing.T) {
	a := &Endpoint{IP: addrs("10.0.0.1")[0], Port: 80, Ready: true, Hints: &EndpointHints{Zones: []string{"a"}}}
	b := *a
	b.Hints = &EndpointHints{Zones: []string{"b"}}
	if endpointsEqual(a, &b) || !endpointsEqual(a, a) {
		t.Errorf("endpointsEqual")
	}
	if endpointListsEqual(nil, []*Endpoint{}) || !endpointListsEqual([]*Endpoint{a}, []*Endpoint{a}) {
		t.Errorf("endpointListsEqual")
	}
	p := &ServicePort{Port: 80}
	q := &ServicePort{Port: 81}
	if servicePortsEqual(p, nil) || servicePortsEqual(p, q) || !servicePortsEqual(nil, nil) {
		t.Errorf("servicePortsEqual")
	}
	if portListsEqual([]*ServicePort{p}, []*ServicePort{{Name: spn("x", "y", "", v1.ProtocolTCP)}}) {
		t.Errorf("portListsEqual with different names")
	}
}

func TestEndpointProblemsReportedForChangedSlicesOnly(t *testing.T) {
	s := NewState(v1.IPv4Protocol, testNode)
	bad := httpSlice("ns", "svc", "bad", ep("10.0.0.1"), ep("not-an-ip"))
	good := httpSlice("ns", "svc", "good", ep("10.0.0.2"))
	s.AddEndpointSlice(bad)
	s.AddEndpointSlice(good)
	upd := s.Commit()
	if len(upd.Problems) != 1 || upd.Problems[0].Object.Name != "bad" || upd.Problems[0].Family != v1.IPv4Protocol {
		t.Fatalf("problems = %v", upd.Problems)
	}
	good2 := good.DeepCopy()
	good2.Endpoints = append(good2.Endpoints, ep("10.0.0.3"))
	s.UpdateEndpointSlice(good, good2)
	if upd := s.Commit(); len(upd.Problems) != 0 {
		t.Errorf("problems of an unchanged slice repeated: %v", upd.Problems)
	}
	if got := len(s.Endpoints(spn("ns", "svc", "http", v1.ProtocolTCP))); got != 3 {
		t.Errorf("endpoints = %d, want 3", got)
	}
}
