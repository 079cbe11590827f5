// Package dptest builds the API objects (Services, EndpointSlices) that the tests
// of the dataplane packages feed to their proxiers, so that every mode's tests
// describe their cases with the same vocabulary; the fakes every proxier fixture
// wires in (Parts); and the scenarios every mode's proxier must pass alike
// (RunScenarios, over a mode's Fixture). It is for tests only.
package dptest

import (
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// ServiceOption changes a Service built by Service.
type ServiceOption func(*v1.Service)

// Service is a single-stack IPv4 ClusterIP Service; opts add ports and more.
func Service(ns, name, clusterIP string, opts ...ServiceOption) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			ClusterIP:  clusterIP,
			ClusterIPs: []string{clusterIP},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
		},
	}
	for _, o := range opts {
		o(svc)
	}
	return svc
}

// WithPort adds a port.
func WithPort(name string, proto v1.Protocol, port, targetPort int32) ServiceOption {
	return func(svc *v1.Service) {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: name, Protocol: proto, Port: port, TargetPort: intstr.FromInt32(targetPort)})
	}
}

// AsLoadBalancer makes the Service a LoadBalancer with the given VIP and node port
// on its last port; local sets externalTrafficPolicy Local with healthCheckNodePort.
func AsLoadBalancer(vip string, nodePort int32, local bool, healthCheckNodePort int32) ServiceOption {
	return func(svc *v1.Service) {
		svc.Spec.Type = v1.ServiceTypeLoadBalancer
		svc.Spec.Ports[len(svc.Spec.Ports)-1].NodePort = nodePort
		svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: vip}}
		if local {
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			svc.Spec.HealthCheckNodePort = healthCheckNodePort
		}
	}
}

// WithInternalLocal sets internalTrafficPolicy Local.
func WithInternalLocal() ServiceOption {
	return func(svc *v1.Service) {
		svc.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	}
}

// SliceEndpoint is one endpoint of a Slice.
type SliceEndpoint struct {
	ip      string
	node    string
	serving bool // ready and serving when true; neither when false
}

// Ready is a ready and serving endpoint on node.
func Ready(ip, node string) SliceEndpoint { return SliceEndpoint{ip: ip, node: node, serving: true} }

// NotReady is an endpoint on node that is neither ready nor serving.
func NotReady(ip, node string) SliceEndpoint { return SliceEndpoint{ip: ip, node: node} }

// Slice is an IPv4 EndpointSlice of Service svc with one port.
func Slice(ns, svc, name string, port int32, portName string, proto v1.Protocol, eps ...SliceEndpoint) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   ns,
			Name:        name,
			Labels:      map[string]string{discovery.LabelServiceName: svc},
			Annotations: map[string]string{},
		},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(port), Protocol: ptr.To(proto)}},
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{
			Addresses: []string{e.ip},
			NodeName:  ptr.To(e.node),
			Conditions: discovery.EndpointConditions{
				Ready: ptr.To(e.serving), Serving: ptr.To(e.serving), Terminating: ptr.To(false),
			},
		})
	}
	return s
}

// WithTriggerTime sets the slice's last-change-trigger-time annotation.
func WithTriggerTime(s *discovery.EndpointSlice, t time.Time) *discovery.EndpointSlice {
	s.Annotations[v1.EndpointsLastChangeTriggerTime] = t.Format(time.RFC3339Nano)
	return s
}
