package model

import (
	"reflect"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestServiceMapUpdateHeadless(t *testing.T) {
	s := NewState(v1.IPv4Protocol, testNode)
	s.OnServiceAdd(makeService("ns2", "headless", func(svc *v1.Service) {
		svc.Spec.Type = v1.ServiceTypeClusterIP
		svc.Spec.ClusterIP = v1.ClusterIPNone
		addPort(svc, "rpc", v1.ProtocolUDP, 1234, 0, 0)
	}))
	s.OnServiceAdd(makeService("ns2", "headless-without-port", func(svc *v1.Service) {
		svc.Spec.Type = v1.ServiceTypeClusterIP
		svc.Spec.ClusterIP = v1.ClusterIPNone
	}))
	upd := s.Commit()
	if s.Len() != 0 {
		t.Errorf("Len = %d, want 0", s.Len())
	}
	if len(upd.UpdatedServices) != 0 || !upd.Empty() {
		t.Errorf("update = %+v, want nothing", upd)
	}
	if upd.ServiceEvents != 2 {
		t.Errorf("ServiceEvents = %d, want 2", upd.ServiceEvents)
	}
	if len(s.HealthCheckNodePorts()) != 0 {
		t.Errorf("health check ports = %v", s.HealthCheckNodePorts())
	}
}

func TestUpdateServiceTypeExternalName(t *testing.T) {
	s := NewState(v1.IPv4Protocol, testNode)
	s.OnServiceAdd(makeService("ns2", "external-name", func(svc *v1.Service) {
		svc.Spec.Type = v1.ServiceTypeExternalName
		svc.Spec.ClusterIP = "172.16.55.4"
		svc.Spec.ExternalName = "foo2.bar.com"
		addPort(svc, "blah", v1.ProtocolUDP, 1235, 5321, 0)
	}))
	upd := s.Commit()
	if s.Len() != 0 || len(upd.UpdatedServices) != 0 || len(upd.HealthCheckNodePorts) != 0 {
		t.Errorf("Len %d, update %+v: want nothing", s.Len(), upd)
	}
}

func TestBuildServiceMapAddRemove(t *testing.T) {
	s := NewState(v1.IPv4Protocol, testNode)
	services := []*v1.Service{
		makeService("ns2", "cluster-ip", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeClusterIP
			svc.Spec.ClusterIP = "172.16.55.4"
			addPort(svc, "port1", v1.ProtocolUDP, 1234, 4321, 0)
			addPort(svc, "port2", v1.ProtocolUDP, 1235, 5321, 0)
		}),
		makeService("ns2", "node-port", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeNodePort
			svc.Spec.ClusterIP = "172.16.55.10"
			addPort(svc, "port1", v1.ProtocolUDP, 345, 678, 0)
			addPort(svc, "port2", v1.ProtocolTCP, 344, 677, 0)
		}),
		makeService("ns1", "load-balancer", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeLoadBalancer
			svc.Spec.ClusterIP = "172.16.55.11"
			addPort(svc, "foobar", v1.ProtocolUDP, 8675, 30061, 7000)
			addPort(svc, "baz", v1.ProtocolUDP, 8676, 30062, 7001)
			svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.1.2.4"}}
		}),
		makeService("ns1", "only-local-load-balancer", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeLoadBalancer
			svc.Spec.ClusterIP = "172.16.55.12"
			addPort(svc, "foobar2", v1.ProtocolUDP, 8677, 30063, 7002)
			addPort(svc, "baz", v1.ProtocolUDP, 8678, 30064, 7003)
			svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.1.2.3"}}
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			svc.Spec.HealthCheckNodePort = 345
		}),
	}
	for _, svc := range services {
		s.OnServiceAdd(svc)
	}
	upd := s.Commit()
	if s.Len() != 8 || len(upd.Changed) != 8 {
		t.Errorf("Len %d, Changed %v: want 8", s.Len(), upd.Changed)
	}
	wantUpdated := []types.NamespacedName{
		nsn("ns1", "load-balancer"), nsn("ns1", "only-local-load-balancer"), nsn("ns2", "cluster-ip"), nsn("ns2", "node-port"),
	}
	if !slices.Equal(upd.UpdatedServices, wantUpdated) {
		t.Errorf("UpdatedServices = %v, want %v", upd.UpdatedServices, wantUpdated)
	}
	wantHC := map[types.NamespacedName]uint16{nsn("ns1", "only-local-load-balancer"): 345}
	if !reflect.DeepEqual(upd.HealthCheckNodePorts, wantHC) || !upd.HealthCheckNodePortsChanged || !reflect.DeepEqual(s.HealthCheckNodePorts(), wantHC) {
		t.Errorf("health check ports %v (changed %v), want %v", upd.HealthCheckNodePorts, upd.HealthCheckNodePortsChanged, wantHC)
	}
	// Every view exists, with no endpoints.
	for _, name := range s.ServicePortNames() {
		v := s.View(name)
		if v == nil || v.Name != name || v.HasAnyEndpoints || len(v.AllReachableEndpoints) != 0 {
			t.Errorf("view %s = %+v", name, v)
		}
	}

	// Remove some stuff: services[0] loses its first port (and renames the other).
	oneService := makeService("ns2", "cluster-ip", func(svc *v1.Service) {
		svc.Spec.Type = v1.ServiceTypeClusterIP
		svc.Spec.ClusterIP = "172.16.55.4"
		addPort(svc, "p2", v1.ProtocolUDP, 1235, 5321, 0)
	})
	s.OnServiceUpdate(services[0], oneService)
	s.OnServiceDelete(services[1])
	s.OnServiceDelete(services[2])
	s.OnServiceDelete(services[3])
	upd = s.Commit()
	if s.Len() != 1 || !slices.Equal(s.ServicePortNames(), []ServicePortName{spn("ns2", "cluster-ip", "p2", v1.ProtocolUDP)}) {
		t.Errorf("names = %v", s.ServicePortNames())
	}
	if len(upd.UpdatedServices) != 4 {
		t.Errorf("UpdatedServices = %v, want 4", upd.UpdatedServices)
	}
	if !slices.Equal(upd.Changed, []ServicePortName{spn("ns2", "cluster-ip", "p2", v1.ProtocolUDP)}) {
		t.Errorf("Changed = %v", upd.Changed)
	}
	if len(upd.Deleted) != 8 {
		t.Errorf("Deleted = %v, want 8", upd.Deleted)
	}
	// All deleted ports but node-port:port2 are UDP.
	if len(upd.DeletedUDPServicePorts) != 7 {
		t.Errorf("DeletedUDPServicePorts = %d, want 7", len(upd.DeletedUDPServicePorts))
	}
	for _, p := range upd.DeletedUDPServicePorts {
		if p.Protocol != v1.ProtocolUDP || !p.ClusterIP.IsValid() {
			t.Errorf("deleted UDP port %+v", p)
		}
		if p.Name.Name == "load-balancer" && !slices.Equal(p.LoadBalancerVIPs, addrs("10.1.2.4")) {
			t.Errorf("deleted LB port lacks its VIPs: %+v", p)
		}
	}
	if len(upd.HealthCheckNodePorts) != 0 || !upd.HealthCheckNodePortsChanged {
		t.Errorf("health check ports %v changed=%v, want none, changed", upd.HealthCheckNodePorts, upd.HealthCheckNodePortsChanged)
	}
}

func TestBuildServiceMapServiceUpdate(t *testing.T) {
	s := NewState(v1.IPv4Protocol, testNode)
	servicev1 := makeService("ns1", "svc1", func(svc *v1.Service) {
		svc.Spec.Type = v1.ServiceTypeClusterIP
		svc.Spec.ClusterIP = "172.16.55.4"
		addPort(svc, "p1", v1.ProtocolUDP, 1234, 4321, 0)
		addPort(svc, "p2", v1.ProtocolTCP, 1235, 5321, 0)
	})
	servicev2 := makeService("ns1", "svc1", func(svc *v1.Service) {
		svc.Spec.Type = v1.ServiceTypeLoadBalancer
		svc.Spec.ClusterIP = "172.16.55.4"
		addPort(svc, "p1", v1.ProtocolUDP, 1234, 4321, 7002)
		addPort(svc, "p2", v1.ProtocolTCP, 1235, 5321, 7003)
		svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.1.2.3"}}
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		svc.Spec.HealthCheckNodePort = 345
	})

	steps := []struct {
		name        string
		apply       func()
		wantUpdated int
		wantChanged int
		wantHC      int
		hcChanged   bool
	}{
		{"add", func() { s.OnServiceAdd(servicev1) }, 1, 2, 0, false},
		{"change to load balancer", func() { s.OnServiceUpdate(servicev1, servicev2) }, 1, 2, 1, true},
		{"no change", func() { s.OnServiceUpdate(servicev2, servicev2) }, 0, 0, 1, false},
		{"back to ClusterIP", func() { s.OnServiceUpdate(servicev2, servicev1) }, 1, 2, 0, true},
		{"there and back again before a commit", func() {
			s.OnServiceUpdate(servicev1, servicev2)
			s.OnServiceUpdate(servicev2, servicev1)
		}, 0, 0, 0, false},
	}
	for _, step := range steps {
		step.apply()
		upd := s.Commit()
		if s.Len() != 2 {
			t.Errorf("%s: Len = %d, want 2", step.name, s.Len())
		}
		if len(upd.UpdatedServices) != step.wantUpdated || len(upd.Changed) != step.wantChanged {
			t.Errorf("%s: updated %v changed %v, want %d and %d", step.name, upd.UpdatedServices, upd.Changed, step.wantUpdated, step.wantChanged)
		}
		if len(upd.HealthCheckNodePorts) != step.wantHC || upd.HealthCheckNodePortsChanged != step.hcChanged {
			t.Errorf("%s: health check ports %v changed=%v, want %d changed=%v", step.name, upd.HealthCheckNodePorts, upd.HealthCheckNodePortsChanged, step.wantHC, step.hcChanged)
		}
	}
}

func TestServiceCacheLeaks(t *testing.T) {
	s := NewState(v1.IPv4Protocol, testNode)
	svc := makeService("ns1", "svc1", func(svc *v1.Service) {
		svc.Spec.Type = v1.ServiceTypeClusterIP
		svc.Spec.ClusterIP = "172.16.55.4"
		addPort(svc, "p1", v1.ProtocolUDP, 1234, 4321, 0)
		addPort(svc, "p2", v1.ProtocolTCP, 1235, 5321, 0)
	})
	s.OnServiceAdd(svc)
	if n, _ := s.Pending(); n != 1 {
		t.Errorf("pending = %d, want 1", n)
	}
	s.OnServiceDelete(svc)
	if n, _ := s.Pending(); n != 0 {
		t.Errorf("pending = %d, want 0", n)
	}
	// Add, commit, delete, commit leaves nothing behind.
	s.OnServiceAdd(svc)
	s.Commit()
	s.OnServiceDelete(svc)
	s.Commit()
	if len(s.services) != 0 || s.Len() != 0 || len(s.healthCheckNodePorts) != 0 {
		t.Errorf("state not cleared: %v", s.services)
	}
}

func TestServiceProblemsReportedOnce(t *testing.T) {
	s := NewState(v1.IPv4Protocol, testNode)
	svc := makeService("ns", "sticky", func(svc *v1.Service) {
		svc.Spec.ClusterIP = "10.0.0.1"
		svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		addPort(svc, "p", v1.ProtocolTCP, 80, 0, 0)
	})
	s.OnServiceAdd(svc)
	s.OnServiceUpdate(svc, svc)
	upd := s.Commit()
	if len(upd.Problems) != 1 || upd.Problems[0].Family != v1.IPv4Protocol || upd.Problems[0].Object != nsn("ns", "sticky") {
		t.Fatalf("problems = %v, want one", upd.Problems)
	}
	if v := s.View(spn("ns", "sticky", "p", v1.ProtocolTCP)); v == nil || v.StickyMaxAgeSeconds != v1.DefaultClientIPServiceAffinitySeconds {
		t.Errorf("view = %+v", v)
	}
	if upd := s.Commit(); len(upd.Problems) != 0 {
		t.Errorf("problems repeated: %v", upd.Problems)
	}
}

// A Service listing one port name twice (the API refuses it; a proxy must not rely
// on that) gets one view of that name, the later port's, as a map keyed by name
// would give.
func TestDuplicatePortNamesGiveOneView(t *testing.T) {
	s := NewState(v1.IPv4Protocol, testNode)
	svc := makeService("ns1", "svc1", func(svc *v1.Service) {
		svc.Spec.Type = v1.ServiceTypeClusterIP
		svc.Spec.ClusterIP = "172.16.55.4"
		addPort(svc, "p", v1.ProtocolTCP, 80, 0, 0)
		addPort(svc, "q", v1.ProtocolTCP, 81, 0, 0)
		addPort(svc, "p", v1.ProtocolTCP, 8080, 0, 0)
	})
	s.OnServiceAdd(svc)
	upd := s.Commit()
	p, q := spn("ns1", "svc1", "p", v1.ProtocolTCP), spn("ns1", "svc1", "q", v1.ProtocolTCP)
	if !slices.Equal(upd.Changed, []ServicePortName{p, q}) || s.Len() != 2 {
		t.Fatalf("Changed = %v, Len = %d; want [p q], 2", upd.Changed, s.Len())
	}
	if v := s.View(p); v == nil || v.Port != 8080 {
		t.Errorf("view of p = %+v, want the later port (8080)", v)
	}
	if names := s.ServicePortNames(); !slices.Equal(names, []ServicePortName{p, q}) {
		t.Errorf("ServicePortNames = %v", names)
	}
}
