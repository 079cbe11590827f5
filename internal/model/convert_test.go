package model

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// expectPort builds the expected ServicePort (Name is filled in by the test).
func expectPort(clusterIP string, port int32, protocol v1.Protocol, nodePort int32, mutate ...func(*ServicePort)) ServicePort {
	p := ServicePort{ClusterIP: netip.MustParseAddr(clusterIP), Port: port, Protocol: protocol, NodePort: nodePort}
	for _, m := range mutate {
		m(&p)
	}
	return p
}

func TestServicePortsForFamily(t *testing.T) {
	const (
		clusterIPv4  = "10.0.0.1"
		externalIPv4 = "8.8.8.8"
		rangeIPv4    = "0.0.0.0/1"
		clusterIPv6  = "2001:db8:85a3::8a2e:370:7334"
		externalIPv6 = "2001:db8:85a3::8a2e:370:7335"
		rangeIPv6    = "2001:db8::/32"
	)
	dualIngress := []v1.LoadBalancerIngress{{IP: externalIPv4}, {IP: externalIPv6}}
	singlePort := func(svc *v1.Service) { addPort(svc, "testPort", v1.ProtocolTCP, 12345, 0, 0) }

	testCases := []struct {
		name     string
		family   v1.IPFamily
		service  *v1.Service
		expected map[ServicePortName]ServicePort
		problems []string // substrings, one per expected problem
	}{{
		name:    "nothing",
		family:  v1.IPv4Protocol,
		service: nil,
	}, {
		name:   "headless service",
		family: v1.IPv4Protocol,
		service: makeService("ns2", "headless", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeClusterIP
			svc.Spec.ClusterIP = v1.ClusterIPNone
			addPort(svc, "rpc", v1.ProtocolUDP, 1234, 0, 0)
		}),
	}, {
		name:   "headless sctp service",
		family: v1.IPv4Protocol,
		service: makeService("ns2", "headless", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeClusterIP
			svc.Spec.ClusterIP = v1.ClusterIPNone
			addPort(svc, "sip", v1.ProtocolSCTP, 7777, 0, 0)
		}),
	}, {
		name:   "headless service without port",
		family: v1.IPv4Protocol,
		service: makeService("ns2", "headless-without-port", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeClusterIP
			svc.Spec.ClusterIP = v1.ClusterIPNone
		}),
	}, {
		name:   "no cluster IP",
		family: v1.IPv4Protocol,
		service: makeService("ns2", "no-ip", func(svc *v1.Service) {
			addPort(svc, "p", v1.ProtocolTCP, 80, 0, 0)
		}),
	}, {
		name:   "cluster ip service",
		family: v1.IPv4Protocol,
		service: makeService("ns2", "cluster-ip", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeClusterIP
			svc.Spec.ClusterIP = "172.16.55.4"
			addPort(svc, "p1", v1.ProtocolUDP, 1234, 4321, 0)
			addPort(svc, "p2", v1.ProtocolUDP, 1235, 5321, 0)
		}),
		expected: map[ServicePortName]ServicePort{
			spn("ns2", "cluster-ip", "p1", v1.ProtocolUDP): expectPort("172.16.55.4", 1234, v1.ProtocolUDP, 4321),
			spn("ns2", "cluster-ip", "p2", v1.ProtocolUDP): expectPort("172.16.55.4", 1235, v1.ProtocolUDP, 5321),
		},
	}, {
		name:   "nodeport service",
		family: v1.IPv4Protocol,
		service: makeService("ns2", "node-port", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeNodePort
			svc.Spec.ClusterIP = "172.16.55.10"
			addPort(svc, "port1", v1.ProtocolUDP, 345, 678, 0)
			addPort(svc, "port2", v1.ProtocolTCP, 344, 677, 0)
		}),
		expected: map[ServicePortName]ServicePort{
			spn("ns2", "node-port", "port1", v1.ProtocolUDP): expectPort("172.16.55.10", 345, v1.ProtocolUDP, 678),
			spn("ns2", "node-port", "port2", v1.ProtocolTCP): expectPort("172.16.55.10", 344, v1.ProtocolTCP, 677),
		},
	}, {
		name:   "load balancer service",
		family: v1.IPv4Protocol,
		service: makeService("ns1", "load-balancer", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeLoadBalancer
			svc.Spec.ClusterIP = "172.16.55.11"
			svc.Spec.LoadBalancerIP = "5.6.7.8"
			addPort(svc, "port3", v1.ProtocolUDP, 8675, 30061, 7000)
			addPort(svc, "port4", v1.ProtocolUDP, 8676, 30062, 7001)
			svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.1.2.4"}}
		}),
		expected: map[ServicePortName]ServicePort{
			spn("ns1", "load-balancer", "port3", v1.ProtocolUDP): expectPort("172.16.55.11", 8675, v1.ProtocolUDP, 30061, func(p *ServicePort) { p.LoadBalancerVIPs = addrs("10.1.2.4") }),
			spn("ns1", "load-balancer", "port4", v1.ProtocolUDP): expectPort("172.16.55.11", 8676, v1.ProtocolUDP, 30062, func(p *ServicePort) { p.LoadBalancerVIPs = addrs("10.1.2.4") }),
		},
	}, {
		name:   "load balancer service ipMode VIP",
		family: v1.IPv4Protocol,
		service: makeService("ns1", "load-balancer", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeLoadBalancer
			svc.Spec.ClusterIP = "172.16.55.11"
			addPort(svc, "port3", v1.ProtocolUDP, 8675, 30061, 7000)
			svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.1.2.4", IPMode: ptr.To(v1.LoadBalancerIPModeVIP)}}
		}),
		expected: map[ServicePortName]ServicePort{
			spn("ns1", "load-balancer", "port3", v1.ProtocolUDP): expectPort("172.16.55.11", 8675, v1.ProtocolUDP, 30061, func(p *ServicePort) { p.LoadBalancerVIPs = addrs("10.1.2.4") }),
		},
	}, {
		name:   "load balancer service ipMode Proxy",
		family: v1.IPv4Protocol,
		service: makeService("ns1", "load-balancer", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeLoadBalancer
			svc.Spec.ClusterIP = "172.16.55.11"
			addPort(svc, "port3", v1.ProtocolUDP, 8675, 30061, 7000)
			svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.1.2.4", IPMode: ptr.To(v1.LoadBalancerIPModeProxy)}, {Hostname: "lb.example.com"}}
		}),
		expected: map[ServicePortName]ServicePort{
			spn("ns1", "load-balancer", "port3", v1.ProtocolUDP): expectPort("172.16.55.11", 8675, v1.ProtocolUDP, 30061),
		},
	}, {
		name:   "load balancer service with only local traffic policy",
		family: v1.IPv4Protocol,
		service: makeService("ns1", "only-local-load-balancer", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeLoadBalancer
			svc.Spec.ClusterIP = "172.16.55.12"
			addPort(svc, "portx", v1.ProtocolUDP, 8677, 30063, 7002)
			addPort(svc, "porty", v1.ProtocolUDP, 8678, 30064, 7003)
			svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.1.2.3"}}
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			svc.Spec.HealthCheckNodePort = 345
		}),
		expected: map[ServicePortName]ServicePort{
			spn("ns1", "only-local-load-balancer", "portx", v1.ProtocolUDP): expectPort("172.16.55.12", 8677, v1.ProtocolUDP, 30063, func(p *ServicePort) {
				p.LoadBalancerVIPs = addrs("10.1.2.3")
				p.ExternalPolicyLocal = true
				p.HealthCheckNodePort = 345
			}),
			spn("ns1", "only-local-load-balancer", "porty", v1.ProtocolUDP): expectPort("172.16.55.12", 8678, v1.ProtocolUDP, 30064, func(p *ServicePort) {
				p.LoadBalancerVIPs = addrs("10.1.2.3")
				p.ExternalPolicyLocal = true
				p.HealthCheckNodePort = 345
			}),
		},
	}, {
		name:   "local load balancer without health check node port",
		family: v1.IPv4Protocol,
		service: makeService("ns1", "lb", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeLoadBalancer
			svc.Spec.ClusterIP = "172.16.55.12"
			addPort(svc, "p", v1.ProtocolTCP, 80, 30063, 0)
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		}),
		expected: map[ServicePortName]ServicePort{
			spn("ns1", "lb", "p", v1.ProtocolTCP): expectPort("172.16.55.12", 80, v1.ProtocolTCP, 30063, func(p *ServicePort) { p.ExternalPolicyLocal = true }),
		},
		problems: []string{"spec.healthCheckNodePort"},
	}, {
		name:   "NodePort with eTP Local: local policy but no health check",
		family: v1.IPv4Protocol,
		service: makeService("ns1", "np", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeNodePort
			svc.Spec.ClusterIP = "172.16.55.12"
			addPort(svc, "p", v1.ProtocolTCP, 80, 30063, 0)
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			svc.Spec.HealthCheckNodePort = 345
		}),
		expected: map[ServicePortName]ServicePort{
			spn("ns1", "np", "p", v1.ProtocolTCP): expectPort("172.16.55.12", 80, v1.ProtocolTCP, 30063, func(p *ServicePort) { p.ExternalPolicyLocal = true }),
		},
	}, {
		name:   "ClusterIP with eTP Local and no externalIPs is not externally accessible",
		family: v1.IPv4Protocol,
		service: makeService("ns1", "cip", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeClusterIP
			svc.Spec.ClusterIP = "172.16.55.12"
			addPort(svc, "p", v1.ProtocolTCP, 80, 0, 0)
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			svc.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
		}),
		expected: map[ServicePortName]ServicePort{
			spn("ns1", "cip", "p", v1.ProtocolTCP): expectPort("172.16.55.12", 80, v1.ProtocolTCP, 0, func(p *ServicePort) { p.InternalPolicyLocal = true }),
		},
	}, {
		name:   "external name service",
		family: v1.IPv4Protocol,
		service: makeService("ns2", "external-name", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeExternalName
			svc.Spec.ClusterIP = "172.16.55.4" // ignored
			svc.Spec.ExternalName = "foo2.bar.com"
			addPort(svc, "portz", v1.ProtocolUDP, 1235, 5321, 0)
		}),
	}, {
		name:   "service with ipv6 clusterIP under ipv4 mode, service should be filtered",
		family: v1.IPv4Protocol,
		service: makeService("test", "invalidIPv6InIPV4Mode", func(svc *v1.Service) {
			svc.Spec.ClusterIP = clusterIPv6
			singlePort(svc)
			svc.Status.LoadBalancer.Ingress = dualIngress
		}),
	}, {
		name:   "service with ipv4 clusterIP under ipv6 mode, service should be filtered",
		family: v1.IPv6Protocol,
		service: makeService("test", "invalidIPv4InIPV6Mode", func(svc *v1.Service) {
			svc.Spec.ClusterIP = clusterIPv4
			singlePort(svc)
			svc.Status.LoadBalancer.Ingress = dualIngress
		}),
	}, {
		name:   "service with ipv4 configurations under ipv4 mode",
		family: v1.IPv4Protocol,
		service: makeService("test", "validIPv4", func(svc *v1.Service) {
			svc.Spec.ClusterIP = clusterIPv4
			svc.Spec.ExternalIPs = []string{externalIPv4}
			svc.Spec.LoadBalancerSourceRanges = []string{rangeIPv4}
			singlePort(svc)
			svc.Status.LoadBalancer.Ingress = dualIngress
		}),
		expected: map[ServicePortName]ServicePort{
			spn("test", "validIPv4", "testPort", v1.ProtocolTCP): expectPort(clusterIPv4, 12345, v1.ProtocolTCP, 0, func(p *ServicePort) {
				p.ExternalIPs = addrs(externalIPv4)
				p.LoadBalancerSourceRanges = prefixes(rangeIPv4)
				p.LoadBalancerVIPs = addrs(externalIPv4)
			}),
		},
	}, {
		name:   "service with ipv6 configurations under ipv6 mode",
		family: v1.IPv6Protocol,
		service: makeService("test", "validIPv6", func(svc *v1.Service) {
			svc.Spec.ClusterIP = clusterIPv6
			svc.Spec.ExternalIPs = []string{externalIPv6}
			svc.Spec.LoadBalancerSourceRanges = []string{rangeIPv6}
			singlePort(svc)
			svc.Status.LoadBalancer.Ingress = dualIngress
		}),
		expected: map[ServicePortName]ServicePort{
			spn("test", "validIPv6", "testPort", v1.ProtocolTCP): expectPort(clusterIPv6, 12345, v1.ProtocolTCP, 0, func(p *ServicePort) {
				p.ExternalIPs = addrs(externalIPv6)
				p.LoadBalancerSourceRanges = prefixes(rangeIPv6)
				p.LoadBalancerVIPs = addrs(externalIPv6)
			}),
		},
	}, {
		name:   "service with both ipv4 and ipv6 configurations under ipv4 mode, ipv6 fields should be filtered",
		family: v1.IPv4Protocol,
		service: makeService("test", "filterIPv6InIPV4Mode", func(svc *v1.Service) {
			svc.Spec.ClusterIP = clusterIPv4
			svc.Spec.ExternalIPs = []string{externalIPv4, externalIPv6}
			svc.Spec.LoadBalancerSourceRanges = []string{rangeIPv4, rangeIPv6}
			singlePort(svc)
			svc.Status.LoadBalancer.Ingress = dualIngress
		}),
		expected: map[ServicePortName]ServicePort{
			spn("test", "filterIPv6InIPV4Mode", "testPort", v1.ProtocolTCP): expectPort(clusterIPv4, 12345, v1.ProtocolTCP, 0, func(p *ServicePort) {
				p.ExternalIPs = addrs(externalIPv4)
				p.LoadBalancerSourceRanges = prefixes(rangeIPv4)
				p.LoadBalancerVIPs = addrs(externalIPv4)
			}),
		},
	}, {
		name:   "service with both ipv4 and ipv6 configurations under ipv6 mode, ipv4 fields should be filtered",
		family: v1.IPv6Protocol,
		service: makeService("test", "filterIPv4InIPV6Mode", func(svc *v1.Service) {
			svc.Spec.ClusterIP = clusterIPv6
			svc.Spec.ExternalIPs = []string{externalIPv4, externalIPv6}
			svc.Spec.LoadBalancerSourceRanges = []string{rangeIPv4, rangeIPv6}
			singlePort(svc)
			svc.Status.LoadBalancer.Ingress = dualIngress
		}),
		expected: map[ServicePortName]ServicePort{
			spn("test", "filterIPv4InIPV6Mode", "testPort", v1.ProtocolTCP): expectPort(clusterIPv6, 12345, v1.ProtocolTCP, 0, func(p *ServicePort) {
				p.ExternalIPs = addrs(externalIPv6)
				p.LoadBalancerSourceRanges = prefixes(rangeIPv6)
				p.LoadBalancerVIPs = addrs(externalIPv6)
			}),
		},
	}, {
		name:   "dual-stack service picks the family's cluster IP from clusterIPs",
		family: v1.IPv6Protocol,
		service: makeService("test", "dual", func(svc *v1.Service) {
			svc.Spec.ClusterIP = clusterIPv4
			svc.Spec.ClusterIPs = []string{clusterIPv4, clusterIPv6}
			svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
			singlePort(svc)
		}),
		expected: map[ServicePortName]ServicePort{
			spn("test", "dual", "testPort", v1.ProtocolTCP): expectPort(clusterIPv6, 12345, v1.ProtocolTCP, 0),
		},
	}, {
		name:   "single-stack service with ipFamilies is skipped in the other family",
		family: v1.IPv6Protocol,
		service: makeService("test", "single", func(svc *v1.Service) {
			svc.Spec.ClusterIP = clusterIPv4
			svc.Spec.ClusterIPs = []string{clusterIPv4}
			svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol}
			singlePort(svc)
		}),
	}, {
		name:   "service with extra space in LoadBalancerSourceRanges",
		family: v1.IPv4Protocol,
		service: makeService("test", "extra-space", func(svc *v1.Service) {
			svc.Spec.ClusterIP = clusterIPv4
			svc.Spec.LoadBalancerSourceRanges = []string{" 10.1.2.0/28"}
			singlePort(svc)
		}),
		expected: map[ServicePortName]ServicePort{
			spn("test", "extra-space", "testPort", v1.ProtocolTCP): expectPort(clusterIPv4, 12345, v1.ProtocolTCP, 0, func(p *ServicePort) {
				p.LoadBalancerSourceRanges = prefixes("10.1.2.0/28")
			}),
		},
	}, {
		name:   "zero CIDR among source ranges means allow all",
		family: v1.IPv4Protocol,
		service: makeService("test", "zero", func(svc *v1.Service) {
			svc.Spec.ClusterIP = clusterIPv4
			svc.Spec.LoadBalancerSourceRanges = []string{"10.1.2.0/28", " 0.0.0.0/0 ", rangeIPv6}
			singlePort(svc)
		}),
		expected: map[ServicePortName]ServicePort{
			spn("test", "zero", "testPort", v1.ProtocolTCP): expectPort(clusterIPv4, 12345, v1.ProtocolTCP, 0),
		},
	}, {
		name:   "zero CIDR of the other family does not open this one",
		family: v1.IPv4Protocol,
		service: makeService("test", "zero6", func(svc *v1.Service) {
			svc.Spec.ClusterIP = clusterIPv4
			svc.Spec.LoadBalancerSourceRanges = []string{"10.1.2.0/28", "::/0"}
			singlePort(svc)
		}),
		expected: map[ServicePortName]ServicePort{
			spn("test", "zero6", "testPort", v1.ProtocolTCP): expectPort(clusterIPv4, 12345, v1.ProtocolTCP, 0, func(p *ServicePort) {
				p.LoadBalancerSourceRanges = prefixes("10.1.2.0/28")
			}),
		},
	}, {
		name:   "unmasked source range is masked; leading zeros accepted",
		family: v1.IPv4Protocol,
		service: makeService("test", "sloppy", func(svc *v1.Service) {
			svc.Spec.ClusterIP = "010.000.000.001"
			svc.Spec.LoadBalancerSourceRanges = []string{"10.1.2.7/24"}
			svc.Spec.ExternalIPs = []string{"008.008.008.008"}
			singlePort(svc)
		}),
		expected: map[ServicePortName]ServicePort{
			spn("test", "sloppy", "testPort", v1.ProtocolTCP): expectPort("10.0.0.1", 12345, v1.ProtocolTCP, 0, func(p *ServicePort) {
				p.LoadBalancerSourceRanges = prefixes("10.1.2.0/24")
				p.ExternalIPs = addrs("8.8.8.8")
			}),
		},
	}, {
		name:   "bad data is skipped and reported",
		family: v1.IPv4Protocol,
		service: makeService("test", "bad", func(svc *v1.Service) {
			svc.Spec.Type = v1.ServiceTypeLoadBalancer
			svc.Spec.ClusterIP = clusterIPv4
			svc.Spec.ExternalIPs = []string{"", "  ", "not-an-ip", externalIPv4}
			svc.Spec.LoadBalancerSourceRanges = []string{"", "10.0.0.0/33", "1.2.3.0/24"}
			svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "999.1.1.1"}, {IP: "5.6.7.8"}}
			singlePort(svc)
		}),
		expected: map[ServicePortName]ServicePort{
			spn("test", "bad", "testPort", v1.ProtocolTCP): expectPort(clusterIPv4, 12345, v1.ProtocolTCP, 0, func(p *ServicePort) {
				p.ExternalIPs = addrs(externalIPv4)
				p.LoadBalancerSourceRanges = prefixes("1.2.3.0/24")
				p.LoadBalancerVIPs = addrs("5.6.7.8")
			}),
		},
		problems: []string{"spec.externalIPs[2]", "spec.loadBalancerSourceRanges[1]", "status.loadBalancer.ingress[0].ip"},
	}, {
		name:   "unparsable cluster IP skips the service",
		family: v1.IPv4Protocol,
		service: makeService("test", "badip", func(svc *v1.Service) {
			svc.Spec.ClusterIP = "10.0.0.300"
			singlePort(svc)
		}),
		problems: []string{"spec.clusterIPs"},
	}, {
		name:   "session affinity ClientIP",
		family: v1.IPv4Protocol,
		service: makeService("test", "sticky", func(svc *v1.Service) {
			svc.Spec.ClusterIP = clusterIPv4
			svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](300)}}
			singlePort(svc)
		}),
		expected: map[ServicePortName]ServicePort{
			spn("test", "sticky", "testPort", v1.ProtocolTCP): expectPort(clusterIPv4, 12345, v1.ProtocolTCP, 0, func(p *ServicePort) { p.StickyMaxAgeSeconds = 300 }),
		},
	}, {
		name:   "session affinity ClientIP without config uses the default and reports",
		family: v1.IPv4Protocol,
		service: makeService("test", "sticky-nil", func(svc *v1.Service) {
			svc.Spec.ClusterIP = clusterIPv4
			svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			singlePort(svc)
		}),
		expected: map[ServicePortName]ServicePort{
			spn("test", "sticky-nil", "testPort", v1.ProtocolTCP): expectPort(clusterIPv4, 12345, v1.ProtocolTCP, 0, func(p *ServicePort) { p.StickyMaxAgeSeconds = 10800 }),
		},
		problems: []string{"timeoutSeconds"},
	}, {
		name:   "session affinity timeout out of range",
		family: v1.IPv4Protocol,
		service: makeService("test", "sticky-0", func(svc *v1.Service) {
			svc.Spec.ClusterIP = clusterIPv4
			svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](0)}}
			singlePort(svc)
		}),
		expected: map[ServicePortName]ServicePort{
			spn("test", "sticky-0", "testPort", v1.ProtocolTCP): expectPort(clusterIPv4, 12345, v1.ProtocolTCP, 0, func(p *ServicePort) { p.StickyMaxAgeSeconds = 10800 }),
		},
		problems: []string{"out of range"},
	}, {
		name:   "traffic distribution, internal policy and named target port",
		family: v1.IPv4Protocol,
		service: makeService("test", "td", func(svc *v1.Service) {
			svc.Spec.ClusterIP = clusterIPv4
			svc.Spec.TrafficDistribution = ptr.To(v1.ServiceTrafficDistributionPreferSameNode)
			svc.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
			svc.Spec.Ports = []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("web")}}
		}),
		expected: map[ServicePortName]ServicePort{
			spn("test", "td", "http", v1.ProtocolTCP): expectPort(clusterIPv4, 80, v1.ProtocolTCP, 0, func(p *ServicePort) {
				p.TrafficDistribution = v1.ServiceTrafficDistributionPreferSameNode
				p.InternalPolicyLocal = true
				p.TargetPortName = "web"
			}),
		},
	}}

	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			ports, problems := ServicePortsForFamily(tc.service, tc.family)
			got := map[ServicePortName]ServicePort{}
			for _, p := range ports {
				got[p.Name] = *p
			}
			for name, want := range tc.expected {
				want.Name = name
				tc.expected[name] = want
			}
			if len(got) != len(tc.expected) {
				t.Fatalf("got %d ports %+v, want %d", len(got), got, len(tc.expected))
			}
			for name, want := range tc.expected {
				if g, ok := got[name]; !ok || !reflect.DeepEqual(g, want) {
					t.Errorf("port %s:\n got %+v\nwant %+v", name, g, want)
				}
			}
			if len(problems) != len(tc.problems) {
				t.Fatalf("got problems %v, want %d matching %q", problems, len(tc.problems), tc.problems)
			}
			for i, p := range problems {
				if !strings.Contains(p.Error(), tc.problems[i]) {
					t.Errorf("problem %d = %q, want it to mention %q", i, p, tc.problems[i])
				}
			}
		})
	}
}

// TestUnprogrammablePortsSkipped: ports the API server never lets through (and no
// kernel could hold) are skipped and reported, so one such Service cannot make the
// node's whole ruleset fail to load; the Service's other ports stay.
func TestUnprogrammablePortsSkipped(t *testing.T) {
	svc := makeService("ns", "s", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.ClusterIP = "10.96.0.1"
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = 70000
		addPort(s, "big", v1.ProtocolTCP, 70000, 0, 80)
		addPort(s, "neg", v1.ProtocolTCP, -1, 0, 80)
		addPort(s, "np", v1.ProtocolUDP, 53, 1<<30, 53)
		addPort(s, "icmp", "ICMP", 7, 0, 7)
		addPort(s, "ok", v1.ProtocolSCTP, 7777, 30000, 7777)
	})
	ports, problems := ServicePortsForFamily(svc, v1.IPv4Protocol)
	if len(ports) != 1 || ports[0].Name.Port != "ok" || ports[0].HealthCheckNodePort != 0 {
		t.Fatalf("ports %+v, want only \"ok\" without a health check node port", ports)
	}
	if len(problems) != 5 {
		t.Fatalf("problems %v, want 5 (4 ports and the health check node port)", problems)
	}

	slice := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "s-1", Labels: map[string]string{discovery.LabelServiceName: "s"}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints:   []discovery.Endpoint{{Addresses: []string{"10.0.0.1"}}},
		Ports:       []discovery.EndpointPort{{Name: ptr.To("a"), Port: ptr.To[int32](-5)}, {Name: ptr.To("b"), Port: ptr.To[int32](65536)}, {Name: ptr.To("c"), Port: ptr.To[int32](65535)}},
	}
	got := NewEndpointSlice(slice, testNode, nil)
	if len(got.Ports) != 1 || got.Ports[0].Name != "c" || len(got.Problems) != 2 {
		t.Fatalf("slice ports %+v, problems %v; want only \"c\" and 2 problems", got.Ports, got.Problems)
	}
}
