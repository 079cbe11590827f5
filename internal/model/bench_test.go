package model

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// benchState builds a committed State with services Services of endpoints endpoints
// each, and returns one Service's slice in two versions that differ in one endpoint's
// readiness.
func benchState(b *testing.B, services, endpoints int) (*State, [2]*discovery.EndpointSlice) {
	b.Helper()
	s := NewState(v1.IPv4Protocol, testNode)
	var flip [2]*discovery.EndpointSlice
	for i := range services {
		name := fmt.Sprintf("svc-%05d", i)
		s.OnServiceAdd(clusterIPService("ns", name, fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)))
		eps := make([]discovery.Endpoint, endpoints)
		for j := range endpoints {
			node := "other"
			if j == 0 {
				node = testNode
			}
			eps[j] = ep(fmt.Sprintf("10.%d.%d.%d", 1+i/62500, (i/250)%250, (i%250)*endpoints/10+j+1), onNode(node))
		}
		slice := httpSlice("ns", name, name+"-abcde", eps...)
		s.AddEndpointSlice(slice)
		if i == services/2 {
			flip[0] = slice
			flip[1] = slice.DeepCopy()
			flip[1].Endpoints[3].Conditions.Ready = new(bool)
		}
	}
	if upd := s.Commit(); len(upd.Changed) != services {
		b.Fatalf("setup: %d views, want %d", len(upd.Changed), services)
	}
	return s, flip
}

// BenchmarkCommitOneChange measures an EndpointSlice update of one Service among
// 10,000 Services of 10 endpoints each, from the handler call to the committed Update.
func BenchmarkCommitOneChange(b *testing.B) {
	s, flip := benchState(b, 10000, 10)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.UpdateEndpointSlice(flip[i%2], flip[(i+1)%2])
		upd := s.Commit()
		if len(upd.Changed) != 1 {
			b.Fatalf("Changed = %v", upd.Changed)
		}
		i++
	}
}

// BenchmarkCommitOneServiceChange is the same for a Service update.
func BenchmarkCommitOneServiceChange(b *testing.B) {
	s, _ := benchState(b, 10000, 10)
	a := clusterIPService("ns", "svc-05000", "10.96.20.1")
	c := a.DeepCopy()
	c.Spec.Ports[0].Port = 81
	versions := [2]*v1.Service{a, c}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.OnServiceUpdate(versions[i%2], versions[(i+1)%2])
		if upd := s.Commit(); len(upd.Changed) != 1 {
			b.Fatalf("Changed = %v", upd.Changed)
		}
		i++
	}
}

// BenchmarkCommitNothing is the fixed cost of a Commit with nothing pending.
func BenchmarkCommitNothing(b *testing.B) {
	s, _ := benchState(b, 10000, 10)
	b.ReportAllocs()
	for b.Loop() {
		s.Commit()
	}
}

// BenchmarkCommitOneChangeBySize shows that the cost of one change does not grow with
// the number of Services.
func BenchmarkCommitOneChangeBySize(b *testing.B) {
	for _, services := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", services), func(b *testing.B) {
			s, flip := benchState(b, services, 10)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				s.UpdateEndpointSlice(flip[i%2], flip[(i+1)%2])
				s.Commit()
				i++
			}
		})
	}
}
