package model

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// EndpointSliceServiceName returns the Service an EndpointSlice belongs to (from the
// kubernetes.io/service-name label), or an error when the slice cannot be attributed.
func EndpointSliceServiceName(slice *EndpointSlice) (types.NamespacedName, error) {
	svcName := slice.Service
	if svcName == "" {
		return types.NamespacedName{}, fmt.Errorf("no %s label set on EndpointSlice %s/%s", discovery.LabelServiceName, slice.Namespace, slice.Name)
	}
	if slice.Namespace == "" || slice.Name == "" {
		return types.NamespacedName{}, fmt.Errorf("EndpointSlice %q of Service %q has no namespace or name", slice.Namespace+"/"+slice.Name, svcName)
	}
	return types.NamespacedName{Namespace: slice.Namespace, Name: svcName}, nil
}

// AddressTypeForFamily returns the EndpointSlice address type that carries the family.
func AddressTypeForFamily(family v1.IPFamily) discovery.AddressType {
	if family == v1.IPv6Protocol {
		return discovery.AddressTypeIPv6
	}
	return discovery.AddressTypeIPv4
}

// EndpointsByPort holds a Service's endpoints per ServicePortName, in name order. It
// is a slice, not a map: a Service has a handful of ports, and a map of one entry
// costs ten times the memory of its entry.
type EndpointsByPort []PortEndpoints

// PortEndpoints are the endpoints of one ServicePortName.
type PortEndpoints struct {
	Name      ServicePortName
	Endpoints []*Endpoint
}

// Get returns the endpoints of name (nil when it has none).
func (e EndpointsByPort) Get(name ServicePortName) []*Endpoint {
	for i := range e {
		if e[i].Name == name {
			return e[i].Endpoints
		}
	}
	return nil
}

// EndpointsForService merges the converted EndpointSlices of one Service (all of the
// family's address type; pass them in a stable order, e.g. sorted by name) into the
// endpoints of each ServicePortName, as upstream's EndpointSliceCache does:
//
//   - a slice port matches a Service port by name and protocol;
//   - an IP:port listed by several slices is kept once: a later non-terminating
//     entry replaces an earlier one, a terminating entry never replaces an existing
//     one (NewEndpointSlice applies the same rule within a slice);
//   - ports with no endpoints are absent; ports are in name order, and each list
//     is sorted by "ip:port" string.
//
// The lists point into the slices' endpoint arrays: a port served by one slice
// costs a list of pointers. The slices' conversion problems are returned.
func EndpointsForService(svc types.NamespacedName, endpointSlices []*EndpointSlice) (EndpointsByPort, []*DataError) {
	var problems []*DataError
	var out EndpointsByPort
	// merged marks the ports whose list came from several slices (re-sorted below).
	var merged []bool
	for _, slice := range endpointSlices {
		if slice == nil {
			continue
		}
		problems = append(problems, slice.Problems...)
		for pi := range slice.Ports {
			port := &slice.Ports[pi]
			if len(port.Endpoints) == 0 {
				continue
			}
			spn := ServicePortName{NamespacedName: svc, Port: port.Name, Protocol: port.Protocol}
			i := slices.IndexFunc(out, func(p PortEndpoints) bool { return p.Name == spn })
			if i < 0 {
				list := make([]*Endpoint, len(port.Endpoints))
				for j := range port.Endpoints {
					list[j] = &port.Endpoints[j]
				}
				out = append(out, PortEndpoints{Name: spn, Endpoints: list})
				merged = append(merged, false)
				continue
			}
			out[i].Endpoints = mergeEndpoints(out[i].Endpoints, port.Endpoints)
			merged[i] = true
		}
	}
	for i := range out {
		if merged[i] {
			sortEndpoints(out[i].Endpoints, func(ep *Endpoint) *Endpoint { return ep })
		}
	}
	slices.SortFunc(out, func(a, b PortEndpoints) int { return CompareServicePortNames(a.Name, b.Name) })
	return slices.Clip(out), problems
}

// mergeEndpoints adds more (a later slice's endpoints of the same port) to list,
// each IP:port once (the rule of EndpointsForService), unsorted.
func mergeEndpoints(list []*Endpoint, more []Endpoint) []*Endpoint {
	at := make(map[netip.AddrPort]int, len(list)+len(more))
	for i, ep := range list {
		at[ep.AddrPort()] = i
	}
	out := slices.Clone(list)
	for j := range more {
		ep := &more[j]
		if i, seen := at[ep.AddrPort()]; seen {
			if !ep.Terminating {
				out[i] = ep
			}
			continue
		}
		at[ep.AddrPort()] = len(out)
		out = append(out, ep)
	}
	return slices.Clip(out)
}

// sortEndpoints orders a list of endpoints (of key's) as upstream does: by their
// "ip:port" string. Lists usually arrive sorted, and are then left as they are.
func sortEndpoints[E any](list []E, key func(E) *Endpoint) {
	type keyed struct {
		key string
		e   E
	}
	tmp := make([]keyed, len(list))
	for i, e := range list {
		tmp[i] = keyed{key(e).String(), e}
	}
	byKey := func(a, b keyed) int { return strings.Compare(a.key, b.key) }
	if slices.IsSortedFunc(tmp, byKey) {
		return
	}
	slices.SortFunc(tmp, byKey)
	for i := range tmp {
		list[i] = tmp[i].e
	}
}
