package model

import (
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// State is the model of one IP family on one node: the committed ServicePorts, their
// endpoints and cached views, plus the changes received since the last Commit.
//
// Concurrency: the On* handlers may be called from any goroutine, concurrently with each
// other and with Commit. Commit and the read methods (View, Views, ...) must be called
// from a single goroutine, the sync loop; views they return are immutable and stay valid
// after later Commits (which replace, never modify, them). Other goroutines (the state
// API) read through Inspect, which holds Commit off while they do.
type State struct {
	family      v1.IPFamily
	addressType discovery.AddressType
	nodeName    string

	mu sync.Mutex
	// Guarded by mu: changes received since the last Commit.
	pendingServices map[types.NamespacedName]*serviceChange
	pendingSlices   map[types.NamespacedName]map[string]*sliceChange
	pendingZone     *string
	triggerTimes    map[types.NamespacedName][]time.Time
	problems        []*DataError
	problemKeys     map[string]struct{}
	serviceEvents   int
	endpointEvents  int
	// triggerCutoff: trigger times not after it are dropped (see IgnoreTriggerTimesBefore).
	triggerCutoff time.Time
	// appliedSlices holds the committed EndpointSlices by Service, in slice name
	// order (a list: most Services have one slice). Handlers read it under mu; only
	// Commit writes it (under mu), so Commit may also read it without mu.
	appliedSlices map[types.NamespacedName][]*EndpointSlice

	// committed is held for writing by Commit and for reading by Inspect, so that
	// goroutines other than the sync loop can read the committed state below.
	committed sync.RWMutex
	// Committed state, owned by the sync loop goroutine.
	services             map[types.NamespacedName]*serviceState
	zone                 string
	zoneHinted           map[types.NamespacedName]struct{}
	healthCheckNodePorts map[types.NamespacedName]uint16
	portCount            int
}

// serviceChange is a Service's ports before the first pending event and after the last.
type serviceChange struct {
	previous, current []*ServicePort
}

// sliceChange is the newest pending state of one EndpointSlice.
type sliceChange struct {
	slice  *EndpointSlice
	remove bool
}

// serviceState is everything committed about one Service (it may have only ports, or
// only endpoints when slices arrive before or outlive the Service).
//
// Its per-port lists are slices searched linearly, not maps: a Service has a handful
// of ports, and a Go map costs a group of eight 72-byte slots even for one entry
// (a ServicePortName is 64 bytes), which at 10,000 Services was 20 MB, 40% of the
// model.
type serviceState struct {
	// ports are the Service's ports, names unique.
	ports     []*ServicePort
	endpoints EndpointsByPort
	// views has one view per port, in the order of ports.
	views []*ServicePortView
	// localReady is the number of distinct IPs of ready endpoints on this node.
	localReady   int
	hasZoneHints bool
}

// NewState returns an empty model for one IP family on the node named nodeName.
func NewState(family v1.IPFamily, nodeName string) *State {
	return &State{
		family:               family,
		addressType:          AddressTypeForFamily(family),
		nodeName:             nodeName,
		pendingServices:      map[types.NamespacedName]*serviceChange{},
		pendingSlices:        map[types.NamespacedName]map[string]*sliceChange{},
		triggerTimes:         map[types.NamespacedName][]time.Time{},
		problemKeys:          map[string]struct{}{},
		appliedSlices:        map[types.NamespacedName][]*EndpointSlice{},
		services:             map[types.NamespacedName]*serviceState{},
		zoneHinted:           map[types.NamespacedName]struct{}{},
		healthCheckNodePorts: map[types.NamespacedName]uint16{},
	}
}

// Family returns the IP family the State models.
func (s *State) Family() v1.IPFamily { return s.family }

// OnServiceAdd records a new Service.
func (s *State) OnServiceAdd(svc *v1.Service) { s.serviceChanged(nil, svc) }

// OnServiceUpdate records a Service update.
func (s *State) OnServiceUpdate(oldSvc, newSvc *v1.Service) { s.serviceChanged(oldSvc, newSvc) }

// OnServiceDelete records a Service deletion.
func (s *State) OnServiceDelete(svc *v1.Service) { s.serviceChanged(svc, nil) }

func (s *State) serviceChanged(previous, current *v1.Service) {
	svc := current
	if svc == nil {
		svc = previous
	}
	if svc == nil {
		return
	}
	name := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	// Convert outside the lock: it is the expensive part.
	currentPorts, problems := ServicePortsForFamily(current, s.family)

	s.mu.Lock()
	defer s.mu.Unlock()
	s.serviceEvents++
	s.addProblems(problems)
	change, exists := s.pendingServices[name]
	if !exists {
		previousPorts, _ := ServicePortsForFamily(previous, s.family)
		change = &serviceChange{previous: previousPorts}
		s.pendingServices[name] = change
	}
	change.current = currentPorts
	// As upstream: a change that returns to the state before the first pending
	// event cancels out.
	if portListsEqual(change.previous, change.current) {
		delete(s.pendingServices, name)
	}
}

// OnEndpointSliceAdd records a new EndpointSlice. Slices of the other family are
// ignored. Slices converted for another node than the State's are converted again.
func (s *State) OnEndpointSliceAdd(slice *EndpointSlice) { s.sliceChanged(slice, false) }

// OnEndpointSliceUpdate records an EndpointSlice update.
func (s *State) OnEndpointSliceUpdate(_, newSlice *EndpointSlice) {
	s.sliceChanged(newSlice, false)
}

// OnEndpointSliceDelete records an EndpointSlice deletion.
func (s *State) OnEndpointSliceDelete(slice *EndpointSlice) { s.sliceChanged(slice, true) }

// AddEndpointSlice, UpdateEndpointSlice and DeleteEndpointSlice take API objects,
// converted here for the State's node (for callers without the watcher's
// conversion: tests and tools).
func (s *State) AddEndpointSlice(slice *discovery.EndpointSlice) {
	s.OnEndpointSliceAdd(s.convert(slice))
}

// UpdateEndpointSlice: see AddEndpointSlice.
func (s *State) UpdateEndpointSlice(old, slice *discovery.EndpointSlice) {
	s.OnEndpointSliceUpdate(s.convert(old), s.convert(slice))
}

// DeleteEndpointSlice: see AddEndpointSlice.
func (s *State) DeleteEndpointSlice(slice *discovery.EndpointSlice) {
	s.OnEndpointSliceDelete(s.convert(slice))
}

func (s *State) convert(slice *discovery.EndpointSlice) *EndpointSlice {
	if slice == nil {
		return nil
	}
	return NewEndpointSlice(slice, s.nodeName, nil)
}

func (s *State) sliceChanged(slice *EndpointSlice, remove bool) {
	if slice == nil || slice.AddressType != s.addressType {
		return
	}
	slice = slice.forNode(s.nodeName)
	svcName, err := EndpointSliceServiceName(slice)

	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.addProblems([]*DataError{sliceError(slice, "metadata", "", err.Error()+"; EndpointSlice ignored")})
		return
	}
	s.endpointEvents++

	change := &sliceChange{slice: slice, remove: remove}
	pending := s.pendingSlices[svcName]
	var applied *EndpointSlice
	if i, found := findSlice(s.appliedSlices[svcName], slice.Name); found {
		applied = s.appliedSlices[svcName][i]
	}
	// Upstream's rule: compare with the pending state if any, else the applied one.
	// backToApplied: the new state equals the committed one (DeepEqual is the costly
	// part of a handler, so it runs at most twice).
	backToApplied := remove && applied == nil
	if !remove && applied != nil {
		backToApplied = reflect.DeepEqual(applied, slice)
	}
	var changed bool
	if prev, ok := pending[slice.Name]; ok {
		changed = prev.remove != remove || !reflect.DeepEqual(prev.slice, slice)
	} else {
		changed = !backToApplied
	}
	if !changed {
		return
	}

	if remove {
		delete(s.triggerTimes, svcName)
	} else if t, ok, err := lastChangeTriggerTime(slice); err != nil {
		s.addProblems([]*DataError{sliceError(slice, "metadata.annotations["+v1.EndpointsLastChangeTriggerTime+"]",
			slice.TriggerTime, "unparsable time ignored")})
	} else if ok && t.After(s.triggerCutoff) {
		s.triggerTimes[svcName] = append(s.triggerTimes[svcName], t)
	}

	// Going back to the applied state cancels the pending change out.
	if backToApplied {
		delete(pending, slice.Name)
		if len(pending) == 0 {
			delete(s.pendingSlices, svcName)
		}
		return
	}
	if pending == nil {
		pending = map[string]*sliceChange{}
		s.pendingSlices[svcName] = pending
	}
	pending[slice.Name] = change
}

// OnNodeTopologyChange records this node's topology labels (only the zone label,
// topology.kubernetes.io/zone, matters). At Commit, every Service whose endpoints carry
// zone hints is re-categorized; other Services cannot depend on the zone.
func (s *State) OnNodeTopologyChange(labels map[string]string) {
	zone := TopologyZone(labels)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pendingZone = &zone
}

// IgnoreTriggerTimesBefore makes the State drop last-change-trigger-times that are not
// after t, as upstream drops those from before the proxy started (they would report
// the time objects waited for the proxy to start, not network programming latency).
// Call it once, with the proxy's start time, before events flow.
func (s *State) IgnoreTriggerTimesBefore(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.triggerCutoff = t
}

// Pending returns how many Services have uncommitted changes (for the pending gauges).
func (s *State) Pending() (services, endpoints int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pendingServices), len(s.pendingSlices)
}

// addProblems queues problems for the next Update, once each. Callers hold mu.
func (s *State) addProblems(problems []*DataError) {
	for _, p := range problems {
		key := p.Error()
		if _, dup := s.problemKeys[key]; dup {
			continue
		}
		s.problemKeys[key] = struct{}{}
		// A copy: problems may belong to a converted slice, which is shared.
		own := *p
		own.Family = s.family
		s.problems = append(s.problems, &own)
	}
}

// lastChangeTriggerTime reads the endpoints.kubernetes.io/last-change-trigger-time
// annotation; ok is false when it is absent.
func lastChangeTriggerTime(slice *EndpointSlice) (time.Time, bool, error) {
	val := slice.TriggerTime
	if val == "" {
		return time.Time{}, false, nil
	}
	t, err := time.Parse(time.RFC3339Nano, val)
	if err != nil {
		return time.Time{}, false, err
	}
	return t, !t.IsZero(), nil
}

// findSlice returns the position of the slice named name in list (sorted by name),
// or where it would be inserted.
func findSlice(list []*EndpointSlice, name string) (int, bool) {
	return slices.BinarySearchFunc(list, name, func(e *EndpointSlice, name string) int {
		return strings.Compare(e.Name, name)
	})
}
