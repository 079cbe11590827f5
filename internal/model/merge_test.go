package model

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// TestUpdateMerge: the merge of two Commits' Updates describes the same changes as
// one Commit of all the events (apart from a port added and deleted in between,
// which only the merge lists, as deleted), and accumulates what accumulates.
func TestUpdateMerge(t *testing.T) {
	udp := func(name string, port int32, ip string) *v1.Service {
		return makeService("ns", name, func(s *v1.Service) {
			s.Spec.ClusterIP = ip
			addPort(s, "dns", v1.ProtocolUDP, port, 0, 5353)
		})
	}
	slice := func(svc, name, addr string, trigger time.Time) *discovery.EndpointSlice {
		return makeSlice("ns", svc, name, func(s *discovery.EndpointSlice) {
			s.Ports = []discovery.EndpointPort{slicePort("dns", 5353, v1.ProtocolUDP)}
			s.Endpoints = []discovery.Endpoint{ep(addr)}
			s.Annotations[v1.EndpointsLastChangeTriggerTime] = trigger.Format(time.RFC3339Nano)
		})
	}
	t1, t2 := time.Now().Add(time.Minute), time.Now().Add(2*time.Minute)
	first := func(s *State) {
		s.OnServiceAdd(udp("a", 53, "172.30.0.1"))
		s.AddEndpointSlice(slice("a", "a-1", "10.0.0.1", t1))
		s.OnServiceAdd(udp("b", 53, "172.30.0.2"))
		s.OnServiceAdd(udp("gone", 53, "172.30.0.3"))
		s.AddEndpointSlice(makeSlice("ns", "bad", "bad-1", func(s *discovery.EndpointSlice) {
			s.Ports = []discovery.EndpointPort{{Port: nil}}
		}))
	}
	second := func(s *State) {
		s.UpdateEndpointSlice(slice("a", "a-1", "10.0.0.1", t1), slice("a", "a-1", "10.0.0.9", t2))
		s.OnServiceDelete(udp("b", 53, "172.30.0.2"))
		s.OnServiceAdd(udp("c", 53, "172.30.0.4"))
		s.OnServiceDelete(udp("gone", 53, "172.30.0.3"))
	}

	split := NewState(v1.IPv4Protocol, "node")
	first(split)
	merged := split.Commit()
	second(split)
	merged.Merge(split.Commit())

	whole := NewState(v1.IPv4Protocol, "node")
	first(whole)
	second(whole)
	one := whole.Commit()

	a, c := spn("ns", "a", "dns", v1.ProtocolUDP), spn("ns", "c", "dns", v1.ProtocolUDP)
	b, gone := spn("ns", "b", "dns", v1.ProtocolUDP), spn("ns", "gone", "dns", v1.ProtocolUDP)
	if diff := cmp.Diff([]ServicePortName{a, c}, merged.Changed); diff != "" {
		t.Errorf("Changed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(one.Changed, merged.Changed); diff != "" {
		t.Errorf("Changed differs from one Commit's (-one +merged):\n%s", diff)
	}
	if diff := cmp.Diff([]ServicePortName{b, gone}, merged.Deleted); diff != "" {
		t.Errorf("Deleted (-want +got):\n%s", diff)
	}
	// b and gone were touched in between: the merge names them, one Commit does not.
	wantUpdated := append(slices.Clone(one.UpdatedServices), nsn("ns", "b"), nsn("ns", "gone"))
	slices.SortFunc(wantUpdated, compareNames)
	if diff := cmp.Diff(wantUpdated, merged.UpdatedServices); diff != "" {
		t.Errorf("UpdatedServices (-want +got):\n%s", diff)
	}
	if got := merged.LastChangeTriggerTimes[nsn("ns", "a")]; len(got) != 2 || !got[0].Equal(t1) || !got[1].Equal(t2) {
		t.Errorf("trigger times of a = %v, want %v and %v", got, t1, t2)
	}
	if merged.ServiceEvents != 6 || merged.EndpointSliceEvents != 3 {
		t.Errorf("events = %d services, %d slices; want 6 and 3", merged.ServiceEvents, merged.EndpointSliceEvents)
	}
	if len(merged.Problems) != 1 || len(one.Problems) != 1 {
		t.Errorf("problems: merged %d, one Commit %d; want 1 each", len(merged.Problems), len(one.Problems))
	}
	if !merged.ConntrackCleanupRequired {
		t.Error("a UDP Service's endpoints changed: conntrack cleanup is required")
	}
	var deletedUDP []ServicePortName
	for _, p := range merged.DeletedUDPServicePorts {
		deletedUDP = append(deletedUDP, p.Name)
	}
	if diff := cmp.Diff([]ServicePortName{b, gone}, deletedUDP); diff != "" {
		t.Errorf("DeletedUDPServicePorts (-want +got):\n%s", diff)
	}
	if stale := merged.StaleUDPEndpoints[a]; len(stale) != 1 || stale[0].IP.String() != "10.0.0.1" {
		t.Errorf("stale UDP endpoints of a = %v, want 10.0.0.1", stale)
	}
}

// TestPrecommitter: Precommits ahead of the first sync and its Commit describe the
// same changes as folding each Commit's Update pairwise with Merge; after the first
// Commit, Precommit does nothing.
func TestPrecommitter(t *testing.T) {
	svc := func(name, ip string) *v1.Service {
		return makeService("ns", name, func(s *v1.Service) {
			s.Spec.ClusterIP = ip
			addPort(s, "dns", v1.ProtocolUDP, 53, 0, 5353)
		})
	}
	steps := []func(s *State){
		func(s *State) { s.OnServiceAdd(svc("a", "172.30.0.1")); s.OnServiceAdd(svc("b", "172.30.0.2")) },
		func(s *State) { s.OnServiceDelete(svc("a", "172.30.0.1")); s.OnServiceAdd(svc("c", "172.30.0.3")) },
		func(s *State) { s.OnServiceAdd(svc("a", "172.30.0.1")) },
		func(s *State) { s.OnServiceDelete(svc("b", "172.30.0.2")) },
	}

	pre := Precommitter{State: NewState(v1.IPv4Protocol, "node")}
	pairwise := NewState(v1.IPv4Protocol, "node")
	var want *Update
	for i, step := range steps {
		step(pre.State)
		step(pairwise)
		if i < len(steps)-1 {
			pre.Precommit()
		}
		if u := pairwise.Commit(); want == nil {
			want = u
		} else {
			want.Merge(u)
		}
	}
	got := pre.Commit()
	for _, c := range []struct {
		name      string
		got, want []ServicePortName
	}{{"Changed", got.Changed, want.Changed}, {"Deleted", got.Deleted, want.Deleted}} {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("%s (-pairwise +precommitted):\n%s", c.name, diff)
		}
	}
	if diff := cmp.Diff(want.UpdatedServices, got.UpdatedServices); diff != "" {
		t.Errorf("UpdatedServices (-pairwise +precommitted):\n%s", diff)
	}
	if got.ServiceEvents != 6 {
		t.Errorf("ServiceEvents = %d, want 6", got.ServiceEvents)
	}
	a, b, c := spn("ns", "a", "dns", v1.ProtocolUDP), spn("ns", "b", "dns", v1.ProtocolUDP), spn("ns", "c", "dns", v1.ProtocolUDP)
	if diff := cmp.Diff([]ServicePortName{a, c}, got.Changed); diff != "" {
		t.Errorf("Changed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]ServicePortName{b}, got.Deleted); diff != "" {
		t.Errorf("Deleted (-want +got):\n%s", diff)
	}

	pre.State.OnServiceAdd(svc("d", "172.30.0.4"))
	pre.Precommit()
	if pending, _ := pre.State.Pending(); pending != 1 {
		t.Errorf("after the first Commit, Precommit committed: %d Services pending, want 1", pending)
	}
}
