package model

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// EndpointSlice is an EndpointSlice as the model reads it: converted once, when it
// arrives, into the endpoints every ServicePort of its Service will point at.
//
// It is what the informer cache holds (watch.Trimmer converts each decoded slice),
// so that the cache and the model share one copy of every endpoint: the model's
// per-port lists point into Ports[i].Endpoints instead of copying them. At 10,000
// Services × 10 endpoints the API objects and the model's copies were 25 MB; the
// converted slices are 9 (see docs/nftables.md, "Memory: what a node keeps").
//
// The conversion is upstream's EndpointSliceCache's, per slice: only the first
// address of an endpoint is used; nil conditions mean ready and serving, not
// terminating; an address listed twice for a port is kept once (a later
// non-terminating entry replaces an earlier one, a terminating one never replaces);
// ports without a name or a number are dropped. What it drops is in Problems.
//
// An EndpointSlice is read-only once converted: the informer cache and every
// model share it.
type EndpointSlice struct {
	// SliceMeta is the slice's metadata as trimmed by the watcher (the informer's
	// keys and resource versions need it); labels and annotations are not kept.
	SliceMeta
	AddressType discovery.AddressType
	// Service is the kubernetes.io/service-name label ("" when absent).
	Service string
	// TriggerTime is the endpoints.kubernetes.io/last-change-trigger-time
	// annotation as written ("" when absent).
	TriggerTime string
	// Node is the node whose endpoints were marked local (Endpoint.IsLocal).
	Node string
	// Ports are the slice's usable ports, each with its endpoints stamped with its
	// number, sorted by "ip:port" and without duplicates.
	Ports []SlicePort
	// Problems are what the conversion dropped, reported when a model applies the
	// slice.
	Problems []*DataError
	// Digest is a hash of the endpoints and ports as the API listed them, in their
	// order. Upstream compares received slices as they are (an update listing the
	// same endpoints in another order is a change); the converted lists are
	// sorted, so the digest keeps that distinction.
	Digest uint64
}

// SlicePort is one port of an EndpointSlice and the endpoints serving it.
type SlicePort struct {
	Name      string
	Protocol  v1.Protocol
	Endpoints []Endpoint
}

// NewEndpointSlice converts an API EndpointSlice for the node named nodeName ("":
// no endpoint is local). place, when not nil, returns the Place that all
// endpoints of a node name and zone share (watch.Trimmer shares them across
// slices); without it, the endpoints of the slice share theirs. Slices of other
// address types than IPv4 and IPv6 keep their metadata only: no model reads them.
func NewEndpointSlice(slice *discovery.EndpointSlice, nodeName string, place func(Place) *Place) *EndpointSlice {
	if place == nil {
		places := map[Place]*Place{}
		place = func(p Place) *Place {
			if shared, ok := places[p]; ok {
				return shared
			}
			places[p] = &p
			return &p
		}
	}
	out := &EndpointSlice{
		SliceMeta:   sliceMeta(&slice.ObjectMeta),
		AddressType: slice.AddressType,
		Service:     slice.Labels[discovery.LabelServiceName],
		TriggerTime: slice.Annotations[v1.EndpointsLastChangeTriggerTime],
		Node:        nodeName,
		Digest:      digest(slice),
	}
	var family v1.IPFamily
	switch slice.AddressType {
	case discovery.AddressTypeIPv4:
		family = v1.IPv4Protocol
	case discovery.AddressTypeIPv6:
		family = v1.IPv6Protocol
	default:
		return out
	}
	eps := convertEndpoints(out, slice.Endpoints, family, nodeName, place)
	for i, port := range slice.Ports {
		if port.Name == nil {
			out.Problems = append(out.Problems, sliceError(out, fmt.Sprintf("ports[%d].name", i), "", "nil port name; port ignored"))
			continue
		}
		if port.Port == nil || *port.Port == 0 {
			out.Problems = append(out.Problems, sliceError(out, fmt.Sprintf("ports[%d].port", i), *port.Name, "missing or zero port number; port ignored"))
			continue
		}
		if *port.Port < 0 || *port.Port > 65535 {
			out.Problems = append(out.Problems, sliceError(out, fmt.Sprintf("ports[%d].port", i), fmt.Sprint(*port.Port), "port number out of range; port ignored"))
			continue
		}
		protocol := v1.ProtocolTCP // the API server's default
		if port.Protocol != nil {
			protocol = *port.Protocol
		}
		out.Ports = append(out.Ports, SlicePort{Name: *port.Name, Protocol: protocol, Endpoints: stampPort(eps, *port.Port)})
	}
	out.Ports = slices.Clip(out.Ports)
	return out
}

// digest hashes what the model reads of a slice's endpoints and ports, in order.
func digest(slice *discovery.EndpointSlice) uint64 {
	h := fnv.New64a()
	str := func(s string) {
		_, _ = h.Write([]byte(s))
		_, _ = h.Write([]byte{0})
	}
	opt := func(s *string) {
		if s == nil {
			_, _ = h.Write([]byte{1})
			return
		}
		str(*s)
	}
	flag := func(b *bool) {
		switch {
		case b == nil:
			_, _ = h.Write([]byte{2})
		case *b:
			_, _ = h.Write([]byte{3})
		default:
			_, _ = h.Write([]byte{4})
		}
	}
	for i := range slice.Endpoints {
		e := &slice.Endpoints[i]
		str(strconv.Itoa(len(e.Addresses)))
		for _, a := range e.Addresses {
			str(a)
		}
		flag(e.Conditions.Ready)
		flag(e.Conditions.Serving)
		flag(e.Conditions.Terminating)
		opt(e.NodeName)
		opt(e.Zone)
		if e.Hints != nil {
			for _, z := range e.Hints.ForZones {
				str("z" + z.Name)
			}
			for _, n := range e.Hints.ForNodes {
				str("n" + n.Name)
			}
		}
		str("/")
	}
	for _, p := range slice.Ports {
		opt(p.Name)
		opt((*string)(p.Protocol))
		if p.Port != nil {
			str(strconv.Itoa(int(*p.Port)))
		}
		opt(p.AppProtocol)
		str("/")
	}
	return h.Sum64()
}

// stampPort returns eps with their port set to port, each address once (a later
// non-terminating entry replaces an earlier one, a terminating one never
// replaces), sorted by "ip:port", in one array of its length.
func stampPort(eps []Endpoint, port int32) []Endpoint {
	out := make([]Endpoint, 0, len(eps))
	at := make(map[netip.Addr]int, len(eps))
	for _, ep := range eps {
		ep.Port = port
		if i, seen := at[ep.IP]; seen {
			if !ep.Terminating {
				out[i] = ep
			}
			continue
		}
		at[ep.IP] = len(out)
		out = append(out, ep)
	}
	sortEndpoints(out, func(ep Endpoint) *Endpoint { return &ep })
	return slices.Clip(out)
}

// convertEndpoints converts the endpoints of a slice of family (without port
// numbers), skipping those without a usable address.
func convertEndpoints(slice *EndpointSlice, in []discovery.Endpoint, family v1.IPFamily, nodeName string, place func(Place) *Place) []Endpoint {
	out := make([]Endpoint, 0, len(in))
	for i := range in {
		e := &in[i]
		if len(e.Addresses) == 0 {
			slice.Problems = append(slice.Problems, sliceError(slice, fmt.Sprintf("endpoints[%d].addresses", i), "", "no address; endpoint ignored"))
			continue
		}
		addr, ok := parseAddr(e.Addresses[0])
		if !ok || familyOf(addr) != family {
			slice.Problems = append(slice.Problems, sliceError(slice, fmt.Sprintf("endpoints[%d].addresses[0]", i), e.Addresses[0],
				fmt.Sprintf("not a valid %s address; endpoint ignored", family)))
			continue
		}
		ep := Endpoint{
			IP:          addr,
			Ready:       e.Conditions.Ready == nil || *e.Conditions.Ready,
			Serving:     e.Conditions.Serving == nil || *e.Conditions.Serving,
			Terminating: e.Conditions.Terminating != nil && *e.Conditions.Terminating,
		}
		if e.NodeName != nil || e.Zone != nil {
			var p Place
			if e.NodeName != nil {
				p.NodeName = *e.NodeName
			}
			if e.Zone != nil {
				p.Zone = *e.Zone
			}
			ep.Place = place(p)
			ep.IsLocal = nodeName != "" && p.NodeName == nodeName
		}
		if e.Hints != nil {
			ep.Hints = convertHints(e.Hints)
		}
		out = append(out, ep)
	}
	return out
}

func convertHints(h *discovery.EndpointHints) *EndpointHints {
	var hints EndpointHints
	for _, z := range h.ForZones {
		if !slices.Contains(hints.Zones, z.Name) {
			hints.Zones = append(hints.Zones, z.Name)
		}
	}
	for _, n := range h.ForNodes {
		if !slices.Contains(hints.Nodes, n.Name) {
			hints.Nodes = append(hints.Nodes, n.Name)
		}
	}
	if hints.Zones == nil && hints.Nodes == nil {
		return nil
	}
	return &hints
}

// forNode returns s converted for nodeName: s itself when it was, else a copy
// whose endpoints' IsLocal is recomputed (callers that convert slices for another
// node than the model's; the watcher converts for the model's node).
func (s *EndpointSlice) forNode(nodeName string) *EndpointSlice {
	if s.Node == nodeName {
		return s
	}
	c := *s
	c.Node = nodeName
	c.Ports = make([]SlicePort, len(s.Ports))
	for i, p := range s.Ports {
		p.Endpoints = slices.Clone(p.Endpoints)
		for j := range p.Endpoints {
			ep := &p.Endpoints[j]
			ep.IsLocal = nodeName != "" && ep.NodeName() == nodeName
		}
		c.Ports[i] = p
	}
	return &c
}

// GetObjectKind is part of runtime.Object: the informer cache stores converted
// slices.
func (s *EndpointSlice) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject is part of runtime.Object.
func (s *EndpointSlice) DeepCopyObject() runtime.Object {
	c := *s
	c.SliceMeta = s.SliceMeta.deepCopy()
	c.Ports = make([]SlicePort, len(s.Ports))
	for i, p := range s.Ports {
		p.Endpoints = slices.Clone(p.Endpoints)
		for j := range p.Endpoints {
			if h := p.Endpoints[j].Hints; h != nil {
				p.Endpoints[j].Hints = &EndpointHints{Zones: slices.Clone(h.Zones), Nodes: slices.Clone(h.Nodes)}
			}
		}
		c.Ports[i] = p
	}
	c.Problems = make([]*DataError, len(s.Problems))
	for i, p := range s.Problems {
		cp := *p
		c.Problems[i] = &cp
	}
	return &c
}

func sliceError(slice *EndpointSlice, field, value, reason string) *DataError {
	return objectError("EndpointSlice", slice, field, value, reason)
}
