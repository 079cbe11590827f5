package model

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

func clusterIPService(ns, name, ip string, mutate ...func(*v1.Service)) *v1.Service {
	return makeService(ns, name, func(svc *v1.Service) {
		svc.Spec.Type = v1.ServiceTypeClusterIP
		svc.Spec.ClusterIP = ip
		addPort(svc, "http", v1.ProtocolTCP, 80, 0, 8080)
		for _, m := range mutate {
			m(svc)
		}
	})
}

func httpSlice(ns, svc, name string, eps ...discovery.Endpoint) *discovery.EndpointSlice {
	return makeSlice(ns, svc, name, func(s *discovery.EndpointSlice) {
		s.Ports = []discovery.EndpointPort{slicePort("http", 8080, v1.ProtocolTCP)}
		s.Endpoints = eps
	})
}

func TestViewsFollowServicesAndEndpoints(t *testing.T) {
	s := NewState(v1.IPv4Protocol, testNode)
	name := spn("ns", "web", "http", v1.ProtocolTCP)
	svc := clusterIPService("ns", "web", "10.96.0.10")

	// Endpoints before the Service: no view yet, but the endpoints are kept.
	slice := httpSlice("ns", "web", "web-1", ep("10.0.0.1", onNode(testNode)), ep("10.0.0.2", onNode("other")))
	s.AddEndpointSlice(slice)
	upd := s.Commit()
	if s.View(name) != nil || !upd.Empty() || len(s.Endpoints(name)) != 2 {
		t.Fatalf("view %v, update %+v, endpoints %v", s.View(name), upd, s.Endpoints(name))
	}

	s.OnServiceAdd(svc)
	upd = s.Commit()
	if !slices.Equal(upd.Changed, []ServicePortName{name}) {
		t.Fatalf("Changed = %v", upd.Changed)
	}
	v := s.View(name)
	if got := endpointStrings(v.ClusterEndpoints); !slices.Equal(got, []string{"10.0.0.1:8080", "10.0.0.2:8080"}) || v.LocalEndpoints != nil || !v.HasAnyEndpoints {
		t.Errorf("view = %+v", v)
	}

	// An update that changes nothing visible (resourceVersion) changes no view.
	slice2 := slice.DeepCopy()
	slice2.ResourceVersion = "2"
	s.UpdateEndpointSlice(slice, slice2)
	upd = s.Commit()
	if !upd.Empty() || len(upd.UpdatedServices) != 1 || s.View(name) != v {
		t.Errorf("no-op slice update: %+v", upd)
	}

	// Switching to internalTrafficPolicy Local changes the view.
	svcLocal := clusterIPService("ns", "web", "10.96.0.10", func(svc *v1.Service) {
		svc.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	})
	s.OnServiceUpdate(svc, svcLocal)
	upd = s.Commit()
	v = s.View(name)
	if !slices.Equal(upd.Changed, []ServicePortName{name}) || v.ClusterEndpoints != nil || !slices.Equal(endpointStrings(v.LocalEndpoints), []string{"10.0.0.1:8080"}) {
		t.Errorf("iTP Local: update %v, view %+v", upd.Changed, v)
	}
	if got := s.LocalReadyEndpoints(); got[nsn("ns", "web")] != 1 {
		t.Errorf("LocalReadyEndpoints = %v", got)
	}

	// Removing the Service deletes the view but keeps the endpoints.
	s.OnServiceDelete(svcLocal)
	upd = s.Commit()
	if !slices.Equal(upd.Deleted, []ServicePortName{name}) || s.View(name) != nil || len(s.Endpoints(name)) != 2 {
		t.Errorf("delete: update %+v", upd)
	}
	if len(upd.DeletedUDPServicePorts) != 0 {
		t.Errorf("TCP port reported as deleted UDP port")
	}
}

func TestCommitReportsOnlyWhatChanged(t *testing.T) {
	s := NewState(v1.IPv4Protocol, testNode)
	const n = 1000
	svcs := make([]*v1.Service, n)
	slicesByIndex := make([]*discovery.EndpointSlice, n)
	for i := range n {
		svcs[i] = clusterIPService("ns", fmt.Sprintf("svc-%04d", i), fmt.Sprintf("10.96.%d.%d", i/250, i%250+1))
		slicesByIndex[i] = httpSlice("ns", svcs[i].Name, svcs[i].Name+"-1", ep(fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)))
		s.OnServiceAdd(svcs[i])
		s.AddEndpointSlice(slicesByIndex[i])
	}
	upd := s.Commit()
	if len(upd.Changed) != n || s.Len() != n {
		t.Fatalf("initial Changed %d Len %d, want %d", len(upd.Changed), s.Len(), n)
	}
	if upd.ServiceEvents != n || upd.EndpointSliceEvents != n {
		t.Errorf("events %d/%d", upd.ServiceEvents, upd.EndpointSliceEvents)
	}

	// Change the endpoints of one Service.
	changed := slicesByIndex[500].DeepCopy()
	changed.Endpoints = append(changed.Endpoints, ep("10.2.0.1"))
	s.UpdateEndpointSlice(slicesByIndex[500], changed)
	upd = s.Commit()
	want := []ServicePortName{spn("ns", "svc-0500", "http", v1.ProtocolTCP)}
	if !slices.Equal(upd.Changed, want) || len(upd.Deleted) != 0 || len(upd.UpdatedServices) != 1 {
		t.Errorf("endpoint change: Changed %v Deleted %v Updated %v, want %v", upd.Changed, upd.Deleted, upd.UpdatedServices, want)
	}
	if upd.EndpointSliceEvents != 1 || upd.ServiceEvents != 0 {
		t.Errorf("events %d/%d", upd.EndpointSliceEvents, upd.ServiceEvents)
	}

	// Change one Service.
	svc := svcs[7].DeepCopy()
	svc.Spec.Ports[0].Port = 81
	s.OnServiceUpdate(svcs[7], svc)
	upd = s.Commit()
	want = []ServicePortName{spn("ns", "svc-0007", "http", v1.ProtocolTCP)}
	if !slices.Equal(upd.Changed, want) || s.View(want[0]).Port != 81 {
		t.Errorf("service change: Changed %v", upd.Changed)
	}

	// Nothing pending: nothing reported.
	if upd := s.Commit(); !upd.Empty() || len(upd.UpdatedServices) != 0 {
		t.Errorf("empty commit reported %+v", upd)
	}

	// Iteration covers every view in order.
	var names []ServicePortName
	for v := range s.Views() {
		names = append(names, v.Name)
	}
	if len(names) != n || !slices.IsSortedFunc(names, CompareServicePortNames) {
		t.Errorf("Views yielded %d names (sorted %v)", len(names), slices.IsSortedFunc(names, CompareServicePortNames))
	}
}

func TestTopologyChangeRecategorizesHintedServices(t *testing.T) {
	s := NewState(v1.IPv4Protocol, testNode)
	hinted := clusterIPService("ns", "hinted", "10.96.0.1")
	plain := clusterIPService("ns", "plain", "10.96.0.2")
	s.OnServiceAdd(hinted)
	s.OnServiceAdd(plain)
	s.AddEndpointSlice(httpSlice("ns", "hinted", "hinted-1",
		ep("10.0.0.1", zoneHints("zone-a")),
		ep("10.0.0.2", zoneHints("zone-b"))))
	s.AddEndpointSlice(httpSlice("ns", "plain", "plain-1", ep("10.0.1.1"), ep("10.0.1.2")))
	s.OnNodeTopologyChange(map[string]string{v1.LabelTopologyZone: "zone-a"})
	s.Commit()
	hintedName := spn("ns", "hinted", "http", v1.ProtocolTCP)
	if got := endpointStrings(s.View(hintedName).ClusterEndpoints); !slices.Equal(got, []string{"10.0.0.1:8080"}) {
		t.Fatalf("zone-a cluster endpoints = %v", got)
	}

	s.OnNodeTopologyChange(map[string]string{v1.LabelTopologyZone: "zone-b", "other": "x"})
	upd := s.Commit()
	if !upd.ZoneChanged || !slices.Equal(upd.Changed, []ServicePortName{hintedName}) || s.Zone() != "zone-b" {
		t.Errorf("zone change: %+v", upd)
	}
	if got := endpointStrings(s.View(hintedName).ClusterEndpoints); !slices.Equal(got, []string{"10.0.0.2:8080"}) {
		t.Errorf("zone-b cluster endpoints = %v", got)
	}

	// Same zone again (other labels changed): nothing to do.
	s.OnNodeTopologyChange(map[string]string{v1.LabelTopologyZone: "zone-b"})
	if upd := s.Commit(); upd.ZoneChanged || !upd.Empty() {
		t.Errorf("unchanged zone: %+v", upd)
	}

	// A zone no endpoint is hinted for: topology ignored.
	s.OnNodeTopologyChange(map[string]string{v1.LabelTopologyZone: "zone-c"})
	s.Commit()
	if got := endpointStrings(s.View(hintedName).ClusterEndpoints); len(got) != 2 {
		t.Errorf("zone-c cluster endpoints = %v", got)
	}
}

func TestDualStackStatesAreIndependent(t *testing.T) {
	s4 := NewState(v1.IPv4Protocol, testNode)
	s6 := NewState(v1.IPv6Protocol, testNode)
	svc := makeService("ns", "dual", func(svc *v1.Service) {
		svc.Spec.ClusterIP = "10.96.0.1"
		svc.Spec.ClusterIPs = []string{"10.96.0.1", "fd00::1"}
		svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
		addPort(svc, "http", v1.ProtocolTCP, 80, 0, 8080)
	})
	v4 := httpSlice("ns", "dual", "dual-v4", ep("10.0.0.1"))
	v6 := httpSlice("ns", "dual", "dual-v6", ep("fd00::10"))
	v6.AddressType = discovery.AddressTypeIPv6
	for _, s := range []*State{s4, s6} {
		s.OnServiceAdd(svc)
		s.AddEndpointSlice(v4)
		s.AddEndpointSlice(v6)
		s.Commit()
	}
	name := spn("ns", "dual", "http", v1.ProtocolTCP)
	if got := endpointStrings(s4.View(name).ClusterEndpoints); !slices.Equal(got, []string{"10.0.0.1:8080"}) || s4.View(name).ClusterIP.String() != "10.96.0.1" {
		t.Errorf("v4 view %v", got)
	}
	if got := endpointStrings(s6.View(name).ClusterEndpoints); !slices.Equal(got, []string{"[fd00::10]:8080"}) || s6.View(name).ClusterIP.String() != "fd00::1" {
		t.Errorf("v6 view %v", got)
	}
	if s4.Family() != v1.IPv4Protocol || s6.NodeName() != testNode {
		t.Errorf("accessors")
	}
}

func TestHandlersAreSafeConcurrently(t *testing.T) {
	s := NewState(v1.IPv4Protocol, testNode)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				name := fmt.Sprintf("svc-%d-%d", w, i%20)
				svc := clusterIPService("ns", name, fmt.Sprintf("10.96.%d.%d", w, i%20+1))
				s.OnServiceAdd(svc)
				s.AddEndpointSlice(httpSlice("ns", name, name+"-1", ep(fmt.Sprintf("10.1.%d.%d", w, i%250+1))))
				s.OnNodeTopologyChange(map[string]string{v1.LabelTopologyZone: fmt.Sprint(i % 3)})
				if i%7 == 0 {
					s.OnServiceDelete(svc)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		s.Commit()
		for v := range s.Views() {
			_ = v.AllReachableEndpoints
		}
	}
	s.Commit()
	if n, m := s.Pending(); n != 0 || m != 0 {
		t.Errorf("pending after final commit: %d %d", n, m)
	}
}
