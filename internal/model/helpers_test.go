package model

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

const testNode = "test-node"

func nsn(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

func spn(ns, name, port string, protocol v1.Protocol) ServicePortName {
	return ServicePortName{NamespacedName: nsn(ns, name), Port: port, Protocol: protocol}
}

func makeService(ns, name string, mutate func(*v1.Service)) *v1.Service {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{}}}
	mutate(svc)
	return svc
}

func addPort(svc *v1.Service, name string, protocol v1.Protocol, port, nodePort int32, targetPort int32) {
	svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{
		Name: name, Protocol: protocol, Port: port, NodePort: nodePort, TargetPort: intstr.FromInt32(targetPort),
	})
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// makeSlice builds an IPv4 EndpointSlice named name for Service svc in namespace ns.
func makeSlice(ns, svc, name string, mutate func(*discovery.EndpointSlice)) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   ns,
			Name:        name,
			Labels:      map[string]string{discovery.LabelServiceName: svc},
			Annotations: map[string]string{},
		},
		AddressType: discovery.AddressTypeIPv4,
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func slicePort(name string, port int32, protocol v1.Protocol) discovery.EndpointPort {
	return discovery.EndpointPort{Name: ptr.To(name), Port: ptr.To(port), Protocol: ptr.To(protocol)}
}

// ep builds an API endpoint with one address; opts tweak it.
func ep(addr string, opts ...func(*discovery.Endpoint)) discovery.Endpoint {
	e := discovery.Endpoint{Addresses: []string{addr}}
	for _, o := range opts {
		o(&e)
	}
	return e
}

func onNode(node string) func(*discovery.Endpoint) {
	return func(e *discovery.Endpoint) { e.NodeName = ptr.To(node) }
}

func conditions(ready, serving, terminating *bool) func(*discovery.Endpoint) {
	return func(e *discovery.Endpoint) {
		e.Conditions = discovery.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating}
	}
}

func zoneHints(zones ...string) func(*discovery.Endpoint) {
	return func(e *discovery.Endpoint) {
		if e.Hints == nil {
			e.Hints = &discovery.EndpointHints{}
		}
		for _, z := range zones {
			e.Hints.ForZones = append(e.Hints.ForZones, discovery.ForZone{Name: z})
		}
	}
}

func nodeHints(nodes ...string) func(*discovery.Endpoint) {
	return func(e *discovery.Endpoint) {
		if e.Hints == nil {
			e.Hints = &discovery.EndpointHints{}
		}
		for _, n := range nodes {
			e.Hints.ForNodes = append(e.Hints.ForNodes, discovery.ForNode{Name: n})
		}
	}
}

// endpointStrings renders endpoints as "ip:port" strings, nil for a nil list.
func endpointStrings(eps []*Endpoint) []string {
	if eps == nil {
		return nil
	}
	out := make([]string, 0, len(eps))
	for _, e := range eps {
		out = append(out, e.String())
	}
	return out
}

// endpointsForService converts API slices for node and merges them, as the model
// does with the slices the watcher converted.
func endpointsForService(svc types.NamespacedName, api []*discovery.EndpointSlice, node string) (EndpointsByPort, []*DataError) {
	converted := make([]*EndpointSlice, len(api))
	for i, s := range api {
		if s != nil {
			converted[i] = NewEndpointSlice(s, node, nil)
		}
	}
	return EndpointsForService(svc, converted)
}
