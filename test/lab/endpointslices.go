package lab

import (
	"fmt"
	"net/netip"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// ControllerName is the managed-by label value of the EndpointSlice controller.
const ControllerName = "endpointslice-controller.k8s.io"

// DefaultMaxEndpointsPerSlice matches the EndpointSlice controller's default.
const DefaultMaxEndpointsPerSlice = 100

// Endpoint describes one backend as the EndpointSlice controller would see its pod.
type Endpoint struct {
	// IPs holds the endpoint's addresses; each goes into the slice of its family.
	IPs         []netip.Addr
	PodName     string // targetRef; empty for none
	NodeName    string
	Zone        string
	Ready       bool
	Serving     bool
	Terminating bool
	ForZones    []string // topology hints
	ForNodes    []string
}

// SliceOptions tunes BuildEndpointSlices.
type SliceOptions struct {
	MaxPerSlice int       // default DefaultMaxEndpointsPerSlice
	TriggerTime time.Time // last-change-trigger-time annotation; zero omits it
}

// ReadyEndpoint is a ready, serving, non-terminating endpoint.
func ReadyEndpoint(pod string, node, zone string, ips ...netip.Addr) Endpoint {
	return Endpoint{IPs: ips, PodName: pod, NodeName: node, Zone: zone, Ready: true, Serving: true}
}

// PortsFromService derives slice ports from the Service's ports: the name, the
// protocol and the numeric target port (the port itself when the target is a name or
// unset, since lab backends are addressed by number).
func PortsFromService(svc *v1.Service) []discoveryv1.EndpointPort {
	var out []discoveryv1.EndpointPort
	for _, sp := range svc.Spec.Ports {
		port := sp.Port
		if sp.TargetPort.IntValue() > 0 {
			port = int32(sp.TargetPort.IntValue())
		}
		proto := sp.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		out = append(out, discoveryv1.EndpointPort{
			Name:     ptr.To(sp.Name),
			Protocol: ptr.To(proto),
			Port:     ptr.To(port),
		})
	}
	return out
}

// SliceName is the deterministic name of the n-th slice of family for a Service. (The
// controller uses generateName; stable names let tests update slices in place.)
func SliceName(service string, family v1.IPFamily, n int) string {
	f := "v4"
	if family == v1.IPv6Protocol {
		f = "v6"
	}
	return fmt.Sprintf("%s-%s-%d", service, f, n)
}

// BuildEndpointSlices returns the EndpointSlices the EndpointSlice controller would
// write for svc and endpoints: one address type per slice, for each of the Service's IP
// families (the families present in endpoints when the Service lists none), at most
// MaxPerSlice endpoints per slice, and one empty slice for a family with no endpoints.
func BuildEndpointSlices(svc *v1.Service, endpoints []Endpoint, ports []discoveryv1.EndpointPort, opts SliceOptions) []*discoveryv1.EndpointSlice {
	maxPer := opts.MaxPerSlice
	if maxPer <= 0 {
		maxPer = DefaultMaxEndpointsPerSlice
	}
	families := svc.Spec.IPFamilies
	if len(families) == 0 {
		families = endpointFamilies(endpoints)
	}
	var out []*discoveryv1.EndpointSlice
	for _, fam := range families {
		var eps []discoveryv1.Endpoint
		for _, ep := range endpoints {
			for _, ip := range ep.IPs {
				if familyOf(ip) == fam {
					eps = append(eps, toDiscoveryEndpoint(svc.Namespace, ep, ip))
				}
			}
		}
		for n := 0; n == 0 || n*maxPer < len(eps); n++ {
			chunk := eps[n*maxPer : min((n+1)*maxPer, len(eps))]
			out = append(out, newSlice(svc, fam, n, chunk, ports, opts.TriggerTime))
		}
	}
	return out
}

func newSlice(svc *v1.Service, fam v1.IPFamily, n int, eps []discoveryv1.Endpoint, ports []discoveryv1.EndpointPort, trigger time.Time) *discoveryv1.EndpointSlice {
	labels := map[string]string{}
	for k, v := range svc.Labels {
		labels[k] = v
	}
	labels[discoveryv1.LabelServiceName] = svc.Name
	labels[discoveryv1.LabelManagedBy] = ControllerName
	if svc.Spec.ClusterIP == v1.ClusterIPNone {
		labels[v1.IsHeadlessService] = ""
	}
	var annotations map[string]string
	if !trigger.IsZero() {
		annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: trigger.UTC().Format(time.RFC3339Nano)}
	}
	if eps == nil {
		eps = []discoveryv1.Endpoint{}
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:        SliceName(svc.Name, fam, n),
			Namespace:   svc.Namespace,
			Labels:      labels,
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         "v1",
				Kind:               "Service",
				Name:               svc.Name,
				UID:                svc.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		AddressType: discoveryv1.AddressType(fam),
		Endpoints:   eps,
		Ports:       append([]discoveryv1.EndpointPort(nil), ports...),
	}
}

func toDiscoveryEndpoint(namespace string, ep Endpoint, ip netip.Addr) discoveryv1.Endpoint {
	out := discoveryv1.Endpoint{
		Addresses: []string{ip.String()},
		Conditions: discoveryv1.EndpointConditions{
			Ready:       ptr.To(ep.Ready),
			Serving:     ptr.To(ep.Serving),
			Terminating: ptr.To(ep.Terminating),
		},
	}
	if ep.NodeName != "" {
		out.NodeName = ptr.To(ep.NodeName)
	}
	if ep.Zone != "" {
		out.Zone = ptr.To(ep.Zone)
	}
	if ep.PodName != "" {
		out.TargetRef = &v1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: ep.PodName}
	}
	if len(ep.ForZones) > 0 || len(ep.ForNodes) > 0 {
		out.Hints = &discoveryv1.EndpointHints{}
		for _, z := range ep.ForZones {
			out.Hints.ForZones = append(out.Hints.ForZones, discoveryv1.ForZone{Name: z})
		}
		for _, n := range ep.ForNodes {
			out.Hints.ForNodes = append(out.Hints.ForNodes, discoveryv1.ForNode{Name: n})
		}
	}
	return out
}

func familyOf(ip netip.Addr) v1.IPFamily {
	if ip.Unmap().Is4() {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

func endpointFamilies(endpoints []Endpoint) []v1.IPFamily {
	seen := map[v1.IPFamily]bool{}
	for _, ep := range endpoints {
		for _, ip := range ep.IPs {
			seen[familyOf(ip)] = true
		}
	}
	var out []v1.IPFamily
	for _, f := range Families {
		if seen[f] {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		out = []v1.IPFamily{v1.IPv4Protocol}
	}
	return out
}
