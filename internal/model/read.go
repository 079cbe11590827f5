package model

import (
	"iter"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/types"
)

// Inspect calls fn, from any goroutine, with the committed state held still: fn may
// call the read methods (View, Endpoints, ServicePortNames, Zone, ...) and keep the
// views and endpoints they return, which later Commits never modify. Commit waits
// until fn returns, so fn must be quick. The sync loop itself reads without it.
func (s *State) Inspect(fn func()) {
	s.committed.RLock()
	defer s.committed.RUnlock()
	fn()
}

// View returns the committed view of a ServicePort, or nil if it does not exist.
func (s *State) View(name ServicePortName) *ServicePortView {
	if st := s.services[name.NamespacedName]; st != nil {
		return findView(st.views, name)
	}
	return nil
}

// findView returns the view named name among views (nil when absent).
func findView(views []*ServicePortView, name ServicePortName) *ServicePortView {
	for _, v := range views {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// Endpoints returns a ServicePortName's committed endpoints before categorization
// (every endpoint of the EndpointSlices, whatever its conditions), for example for
// conntrack reconciliation. Endpoints may exist for ports the Service does not have.
func (s *State) Endpoints(name ServicePortName) []*Endpoint {
	if st := s.services[name.NamespacedName]; st != nil {
		return st.endpoints.Get(name)
	}
	return nil
}

// ServicePortNames returns the names of all committed ServicePorts, sorted.
func (s *State) ServicePortNames() []ServicePortName {
	names := make([]ServicePortName, 0, s.portCount)
	for _, st := range s.services {
		for _, v := range st.views {
			names = append(names, v.Name)
		}
	}
	slices.SortFunc(names, CompareServicePortNames)
	return names
}

// Len returns the number of committed ServicePorts.
func (s *State) Len() int { return s.portCount }

// Views iterates over all committed views in ServicePortNames order, for full syncs.
// Do not call Commit during the iteration.
func (s *State) Views() iter.Seq[*ServicePortView] {
	return func(yield func(*ServicePortView) bool) {
		for _, spn := range s.ServicePortNames() {
			if !yield(s.View(spn)) {
				return
			}
		}
	}
}

// HealthCheckNodePorts returns a copy of the health check node port of every Service
// that needs one.
func (s *State) HealthCheckNodePorts() map[types.NamespacedName]uint16 {
	return maps.Clone(s.healthCheckNodePorts)
}

// LocalReadyEndpoints returns, for every Service with ready endpoints on this node, the
// number of distinct such endpoint IPs (upstream's EndpointsMap.LocalReadyEndpoints).
func (s *State) LocalReadyEndpoints() map[types.NamespacedName]int {
	out := map[types.NamespacedName]int{}
	for name, st := range s.services {
		if st.localReady > 0 {
			out[name] = st.localReady
		}
	}
	return out
}

// Zone returns this node's committed topology zone.
func (s *State) Zone() string { return s.zone }

// NodeName returns the node name the State was built for.
func (s *State) NodeName() string { return s.nodeName }
