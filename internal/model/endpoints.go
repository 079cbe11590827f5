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
func EndpointSliceServiceName(slice *discovery.EndpointSlice) (types.NamespacedName, error) {
	svcName := slice.Labels[discovery.LabelServiceName]
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

// EndpointsForService merges the EndpointSlices of one Service (all of the family's
// address type; pass them in a stable order, e.g. sorted by name) into the endpoints of
// each ServicePortName, as upstream's EndpointSliceCache does:
//
//   - a slice port matches a Service port by name and protocol;
//   - only the first address of an endpoint is used;
//   - an IP:port listed several times is kept once: a later non-terminating entry
//     replaces an earlier one, a terminating entry never replaces an existing one;
//   - nil conditions mean ready=true, serving=true, terminating=false (API docs);
//   - ports with no endpoints are absent; ports are in name order, and each list
//     is sorted by "ip:port" string.
//
// nodeName is this node's name (IsLocal); "" makes every endpoint remote.
func EndpointsForService(svc types.NamespacedName, endpointSlices []*discovery.EndpointSlice, family v1.IPFamily, nodeName string) (EndpointsByPort, []*DataError) {
	var problems []*DataError
	byPort := map[ServicePortName]map[netip.AddrPort]*Endpoint{}
	order := map[ServicePortName][]netip.AddrPort{}
	for _, slice := range endpointSlices {
		if slice == nil {
			continue
		}
		// Convert the slice's endpoints once; each port then only stamps its number.
		eps, epProblems := convertEndpoints(slice, family, nodeName)
		problems = append(problems, epProblems...)
		for i, port := range slice.Ports {
			if port.Name == nil {
				problems = append(problems, sliceError(slice, fmt.Sprintf("ports[%d].name", i), "", "nil port name; port ignored"))
				continue
			}
			if port.Port == nil || *port.Port == 0 {
				problems = append(problems, sliceError(slice, fmt.Sprintf("ports[%d].port", i), *port.Name, "missing or zero port number; port ignored"))
				continue
			}
			protocol := v1.ProtocolTCP // the API server's default
			if port.Protocol != nil {
				protocol = *port.Protocol
			}
			spn := ServicePortName{NamespacedName: svc, Port: *port.Name, Protocol: protocol}
			set := byPort[spn]
			if set == nil {
				set = map[netip.AddrPort]*Endpoint{}
				byPort[spn] = set
			}
			// One array per port and slice instead of one allocation per endpoint:
			// at most len(eps) are stamped here, so the pointers into it stay valid.
			stamped := make([]Endpoint, 0, len(eps))
			for _, base := range eps {
				key := netip.AddrPortFrom(base.IP, uint16(*port.Port))
				if _, exists := set[key]; !exists {
					order[spn] = append(order[spn], key)
				} else if base.Terminating {
					continue
				}
				stamped = append(stamped, *base)
				ep := &stamped[len(stamped)-1]
				ep.Port = *port.Port
				set[key] = ep
			}
		}
	}
	out := make(EndpointsByPort, 0, len(byPort))
	for spn, set := range byPort {
		if len(set) == 0 {
			continue
		}
		list := make([]*Endpoint, 0, len(set))
		for _, key := range order[spn] {
			list = append(list, set[key])
		}
		sortEndpoints(list)
		out = append(out, PortEndpoints{Name: spn, Endpoints: list})
	}
	slices.SortFunc(out, func(a, b PortEndpoints) int { return CompareServicePortNames(a.Name, b.Name) })
	return out, problems
}

// sortEndpoints orders endpoints as upstream does: by their "ip:port" string.
func sortEndpoints(list []*Endpoint) {
	type keyed struct {
		key string
		ep  *Endpoint
	}
	tmp := make([]keyed, len(list))
	for i, ep := range list {
		tmp[i] = keyed{ep.String(), ep}
	}
	slices.SortFunc(tmp, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	for i := range tmp {
		list[i] = tmp[i].ep
	}
}

// convertEndpoints converts a slice's endpoints (without port numbers), skipping those
// without a usable address.
func convertEndpoints(slice *discovery.EndpointSlice, family v1.IPFamily, nodeName string) ([]*Endpoint, []*DataError) {
	var problems []*DataError
	out := make([]*Endpoint, 0, len(slice.Endpoints))
	for i := range slice.Endpoints {
		e := &slice.Endpoints[i]
		if len(e.Addresses) == 0 {
			problems = append(problems, sliceError(slice, fmt.Sprintf("endpoints[%d].addresses", i), "", "no address; endpoint ignored"))
			continue
		}
		addr, ok := parseAddr(e.Addresses[0])
		if !ok || familyOf(addr) != family {
			problems = append(problems, sliceError(slice, fmt.Sprintf("endpoints[%d].addresses[0]", i), e.Addresses[0],
				fmt.Sprintf("not a valid %s address; endpoint ignored", family)))
			continue
		}
		ep := &Endpoint{
			IP:          addr,
			Ready:       e.Conditions.Ready == nil || *e.Conditions.Ready,
			Serving:     e.Conditions.Serving == nil || *e.Conditions.Serving,
			Terminating: e.Conditions.Terminating != nil && *e.Conditions.Terminating,
		}
		if e.NodeName != nil {
			ep.NodeName = *e.NodeName
			ep.IsLocal = nodeName != "" && ep.NodeName == nodeName
		}
		if e.Zone != nil {
			ep.Zone = *e.Zone
		}
		if e.Hints != nil {
			var hints EndpointHints
			for _, z := range e.Hints.ForZones {
				if !slices.Contains(hints.Zones, z.Name) {
					hints.Zones = append(hints.Zones, z.Name)
				}
			}
			for _, n := range e.Hints.ForNodes {
				if !slices.Contains(hints.Nodes, n.Name) {
					hints.Nodes = append(hints.Nodes, n.Name)
				}
			}
			if hints.Zones != nil || hints.Nodes != nil {
				ep.Hints = &hints
			}
		}
		out = append(out, ep)
	}
	return out, problems
}

func sliceError(slice *discovery.EndpointSlice, field, value, reason string) *DataError {
	return &DataError{
		Kind:   "EndpointSlice",
		Object: types.NamespacedName{Namespace: slice.Namespace, Name: slice.Name},
		Field:  field,
		Value:  value,
		Reason: reason,
	}
}
