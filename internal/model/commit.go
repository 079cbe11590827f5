package model

import (
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Update describes what one Commit changed. Slices are sorted; maps are fresh copies the
// caller may keep.
type Update struct {
	// Changed lists the ServicePorts that were added or whose view changed in any way
	// (port, endpoints or their categorization): exactly those whose rules must be
	// rewritten.
	Changed []ServicePortName
	// Deleted lists the ServicePorts that no longer exist.
	Deleted []ServicePortName
	// UpdatedServices lists every Service touched by a committed event, even when no
	// view changed as a result (upstream's UpdatedServices of both trackers).
	UpdatedServices []types.NamespacedName

	// ConntrackCleanupRequired is upstream's trigger for a full UDP conntrack
	// reconciliation: the endpoints of a Service with a UDP port changed.
	ConntrackCleanupRequired bool
	// DeletedUDPServicePorts are the deleted UDP ServicePorts as they last were (with
	// cluster IP, node port, external IPs and load balancer VIPs), whose conntrack
	// entries can be flushed.
	DeletedUDPServicePorts []*ServicePort
	// StaleUDPEndpoints lists, per UDP ServicePortName, the endpoints that were serving
	// before and are now gone or no longer serving.
	StaleUDPEndpoints map[ServicePortName][]*Endpoint
	// UDPServicePortsGainedEndpoints lists UDP ServicePortNames whose serving endpoints
	// went from none to some (entries created while traffic was rejected are stale).
	UDPServicePortsGainedEndpoints []ServicePortName

	// LastChangeTriggerTimes holds, per Service whose EndpointSlices changed, the
	// endpoints.kubernetes.io/last-change-trigger-time values seen, ascending (the first
	// is the earliest). Times not after the IgnoreTriggerTimesBefore cutoff are left out.
	LastChangeTriggerTimes map[types.NamespacedName][]time.Time

	// HealthCheckNodePorts is the complete current map of health check node ports
	// (small: only eTP=Local LoadBalancers); HealthCheckNodePortsChanged says whether it
	// differs from the previous Commit's.
	HealthCheckNodePorts        map[types.NamespacedName]uint16
	HealthCheckNodePortsChanged bool
	// LocalReadyEndpoints holds, for each Service whose endpoints changed, the number
	// of distinct ready endpoint IPs on this node (0 when none).
	LocalReadyEndpoints map[types.NamespacedName]int

	// ZoneChanged reports that this node's zone changed (Services with zone hints
	// were re-categorized).
	ZoneChanged bool

	// ServiceEvents and EndpointSliceEvents count the events received since the last
	// Commit (for the *_changes_total counters).
	ServiceEvents       int
	EndpointSliceEvents int

	// Problems lists bad API data seen since the last Commit.
	Problems []*DataError
}

// Empty reports whether the Commit changed no ServicePort view.
func (u *Update) Empty() bool { return len(u.Changed) == 0 && len(u.Deleted) == 0 }

// Commit applies the pending changes and returns what changed. Its cost is proportional
// to the changed Services (and to the zone-hinted Services when the zone changed), not
// to the number of Services.
func (s *State) Commit() *Update {
	s.committed.Lock()
	defer s.committed.Unlock()
	s.mu.Lock()
	svcChanges := s.pendingServices
	sliceChanges := s.pendingSlices
	s.pendingServices = map[types.NamespacedName]*serviceChange{}
	s.pendingSlices = map[types.NamespacedName]map[string]*sliceChange{}
	for name, changes := range sliceChanges {
		applied := s.appliedSlices[name]
		for sliceName, c := range changes {
			i, found := findSlice(applied, sliceName)
			switch {
			case c.remove && found:
				applied = slices.Delete(applied, i, i+1)
			case c.remove:
			case found:
				applied[i] = c.slice
			default:
				applied = slices.Insert(applied, i, c.slice)
			}
		}
		if len(applied) == 0 {
			delete(s.appliedSlices, name)
		} else {
			s.appliedSlices[name] = applied
		}
	}
	zoneChanged := s.pendingZone != nil && *s.pendingZone != s.zone
	if zoneChanged {
		s.zone = *s.pendingZone
	}
	s.pendingZone = nil
	upd := &Update{
		ServiceEvents:          s.serviceEvents,
		EndpointSliceEvents:    s.endpointEvents,
		LastChangeTriggerTimes: s.triggerTimes,
		Problems:               s.problems,
		ZoneChanged:            zoneChanged,
		StaleUDPEndpoints:      map[ServicePortName][]*Endpoint{},
		LocalReadyEndpoints:    map[types.NamespacedName]int{},
	}
	s.serviceEvents, s.endpointEvents = 0, 0
	s.triggerTimes = map[types.NamespacedName][]time.Time{}
	s.problems = nil
	clear(s.problemKeys)
	s.mu.Unlock()

	for _, times := range upd.LastChangeTriggerTimes {
		slices.SortFunc(times, time.Time.Compare)
	}

	affected := make(map[types.NamespacedName]struct{}, len(svcChanges)+len(sliceChanges))
	for name := range svcChanges {
		affected[name] = struct{}{}
	}
	for name := range sliceChanges {
		affected[name] = struct{}{}
	}
	if zoneChanged {
		for name := range s.zoneHinted {
			affected[name] = struct{}{}
		}
	}
	oldHC := len(s.healthCheckNodePorts)
	for name := range affected {
		change, svcChanged := svcChanges[name]
		changedSlices, slicesChanged := sliceChanges[name]
		if svcChanged || slicesChanged {
			upd.UpdatedServices = append(upd.UpdatedServices, name)
		}
		var ports []*ServicePort
		if svcChanged {
			ports = change.current
		}
		for _, p := range s.recompute(name, svcChanged, ports, slicesChanged, upd) {
			// Report bad data only for the slices that changed: the others were
			// reported when they did.
			if _, ok := changedSlices[p.Object.Name]; ok {
				p.Family = s.family
				upd.Problems = append(upd.Problems, p)
			}
		}
	}
	upd.HealthCheckNodePortsChanged = upd.HealthCheckNodePortsChanged || oldHC != len(s.healthCheckNodePorts)
	upd.HealthCheckNodePorts = maps.Clone(s.healthCheckNodePorts)

	slices.SortFunc(upd.Changed, CompareServicePortNames)
	slices.SortFunc(upd.Deleted, CompareServicePortNames)
	slices.SortFunc(upd.UDPServicePortsGainedEndpoints, CompareServicePortNames)
	slices.SortFunc(upd.DeletedUDPServicePorts, func(a, b *ServicePort) int { return CompareServicePortNames(a.Name, b.Name) })
	slices.SortFunc(upd.UpdatedServices, compareNames)
	return upd
}

// recompute rebuilds one Service's committed state and views and records the
// differences in upd.
func (s *State) recompute(name types.NamespacedName, svcChanged bool, ports []*ServicePort, slicesChanged bool, upd *Update) []*DataError {
	var problems []*DataError
	st := s.services[name]
	if st == nil {
		st = &serviceState{}
	}
	oldViews := st.views

	if svcChanged {
		s.portCount -= len(st.ports)
		st.ports = uniquePorts(ports)
		s.portCount += len(st.ports)
		hcBefore, hadHC := s.healthCheckNodePorts[name]
		delete(s.healthCheckNodePorts, name)
		for _, p := range st.ports {
			if p.HealthCheckNodePort != 0 {
				s.healthCheckNodePorts[name] = uint16(p.HealthCheckNodePort)
			}
		}
		if hcAfter, hasHC := s.healthCheckNodePorts[name]; hadHC != hasHC || hcBefore != hcAfter {
			upd.HealthCheckNodePortsChanged = true
		}
	}

	if slicesChanged {
		oldEndpoints := st.endpoints
		st.endpoints, problems = EndpointsForService(name, s.appliedSlices[name])
		st.localReady = countLocalReadyIPs(st.endpoints)
		upd.LocalReadyEndpoints[name] = st.localReady
		st.hasZoneHints = anyZoneHints(st.endpoints)
		if st.hasZoneHints {
			s.zoneHinted[name] = struct{}{}
		} else {
			delete(s.zoneHinted, name)
		}
		diffUDPEndpoints(oldEndpoints, st.endpoints, upd)
	}

	st.views = make([]*ServicePortView, len(st.ports))
	for i, port := range st.ports {
		view := CategorizeEndpoints(st.endpoints.Get(port.Name), port, s.nodeName, s.zone)
		if old := findView(oldViews, port.Name); old != nil && viewsEqual(old, view) {
			view = old // keep the pointer: consumers may compare identity
		} else {
			upd.Changed = append(upd.Changed, port.Name)
		}
		st.views[i] = view
	}
	for _, old := range oldViews {
		if findView(st.views, old.Name) != nil {
			continue
		}
		upd.Deleted = append(upd.Deleted, old.Name)
		if old.Protocol == v1.ProtocolUDP {
			upd.DeletedUDPServicePorts = append(upd.DeletedUDPServicePorts, old.ServicePort)
		}
	}

	if len(st.ports) == 0 && len(st.endpoints) == 0 {
		delete(s.services, name)
		delete(s.zoneHinted, name)
	} else {
		s.services[name] = st
	}
	return problems
}

// uniquePorts returns ports with one entry per name, the last one of a name winning
// (the API refuses duplicate port names; bad data must still give one view per name).
func uniquePorts(ports []*ServicePort) []*ServicePort {
	out := ports[:0:0]
	for i, p := range ports {
		if !slices.ContainsFunc(ports[i+1:], func(q *ServicePort) bool { return q.Name == p.Name }) {
			out = append(out, p)
		}
	}
	return out
}

// diffUDPEndpoints records conntrack-relevant endpoint changes of UDP ports.
func diffUDPEndpoints(before, after EndpointsByPort, upd *Update) {
	for _, pe := range before {
		spn, eps := pe.Name, pe.Endpoints
		if spn.Protocol == v1.ProtocolUDP {
			upd.ConntrackCleanupRequired = true
		}
		if spn.Protocol != v1.ProtocolUDP {
			continue
		}
		stillServing := map[string]struct{}{}
		for _, ep := range after.Get(spn) {
			if ep.Serving {
				stillServing[ep.String()] = struct{}{}
			}
		}
		for _, ep := range eps {
			if !ep.Serving {
				continue
			}
			if _, ok := stillServing[ep.String()]; !ok {
				upd.StaleUDPEndpoints[spn] = append(upd.StaleUDPEndpoints[spn], ep)
			}
		}
	}
	for _, pe := range after {
		spn, eps := pe.Name, pe.Endpoints
		if spn.Protocol != v1.ProtocolUDP {
			continue
		}
		upd.ConntrackCleanupRequired = true
		if countServing(before.Get(spn)) == 0 && countServing(eps) > 0 {
			upd.UDPServicePortsGainedEndpoints = append(upd.UDPServicePortsGainedEndpoints, spn)
		}
	}
}

func countServing(eps []*Endpoint) int {
	n := 0
	for _, ep := range eps {
		if ep.Serving {
			n++
		}
	}
	return n
}

func countLocalReadyIPs(endpoints EndpointsByPort) int {
	var ips map[string]struct{}
	for _, pe := range endpoints {
		for _, ep := range pe.Endpoints {
			if ep.Ready && ep.IsLocal {
				if ips == nil {
					ips = map[string]struct{}{}
				}
				ips[ep.IP.String()] = struct{}{}
			}
		}
	}
	return len(ips)
}

func anyZoneHints(endpoints EndpointsByPort) bool {
	for _, pe := range endpoints {
		for _, ep := range pe.Endpoints {
			if len(ep.ZoneHints()) > 0 {
				return true
			}
		}
	}
	return false
}

// CompareServicePortNames orders names by namespace, name, port name and protocol.
func CompareServicePortNames(a, b ServicePortName) int {
	if c := compareNames(a.NamespacedName, b.NamespacedName); c != 0 {
		return c
	}
	if c := strings.Compare(a.Port, b.Port); c != 0 {
		return c
	}
	return strings.Compare(string(a.Protocol), string(b.Protocol))
}

func compareNames(a, b types.NamespacedName) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}
