package nftables

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kproxy/kproxy/test/lab"
)

// TestClusterIP: port -> targetPort for TCP and UDP, several ports per Service, and
// load-balancing over the endpoints.
func TestClusterIP(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	ctx := testCtx(t, 90*time.Second)
	svc := createService(ctx, t, l, "cip-multi", func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{
			svcPort("tcp-a", v1.ProtocolTCP, 81, 80),
			svcPort("udp-a", v1.ProtocolUDP, 81, 80),
			svcPort("tcp-b", v1.ProtocolTCP, 82, 8080),
			svcPort("udp-b", v1.ProtocolUDP, 82, 8080),
		}
	}, lab.PodEndpoints(l.Pods...), nil)
	client := l.Node1.Pods[0].NS
	all := podNames(l.Pods...)
	forEachFamily(t, func(t *testing.T, fam v1.IPFamily) {
		ip := clusterIP(t, svc, fam)
		for _, port := range []uint16{81, 82} {
			for _, proto := range tcpUDP {
				to := netip.AddrPortFrom(ip, port)
				waitAnswered(ctx, t, p, client, proto, to, nil)
				replies := collect(ctx, t, p, client, proto, to, 20)
				onlyFrom(t, flow(client, proto, to), replies, all)
				if got := answeringPods(replies); len(got) < 2 {
					t.Errorf("%s: 20 probes reached %v, want more than one endpoint", flow(client, proto, to), got)
				}
				// Not masqueraded (except hairpin): other backends see the pod's own address.
				for _, r := range replies {
					if r.Pod != l.Node1.Pods[0].Name && r.Client.Addr() != l.Node1.Pods[0].IPs.Get(fam) {
						t.Errorf("%s: backend %s saw client %s, want the pod's %s", flow(client, proto, to), r.Pod, r.Client.Addr(), l.Node1.Pods[0].IPs.Get(fam))
						break
					}
				}
			}
		}
	})
}

// TestClusterIPNamedTargetPort: a targetPort given by name is resolved per
// EndpointSlice port name, so two slices may map it to different numbers.
func TestClusterIPNamedTargetPort(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	ctx := testCtx(t, 60*time.Second)
	// The Service's port 90 targets "web"; the slice resolves "web" to 8080 (not 90,
	// where nothing listens), proving the number comes from the slice.
	svc := createService(ctx, t, l, "cip-named", func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{
			{Name: "web", Protocol: v1.ProtocolTCP, Port: 90, TargetPort: intstr.FromString("web")},
			{Name: "dns", Protocol: v1.ProtocolUDP, Port: 90, TargetPort: intstr.FromString("dns")},
		}
	}, lab.PodEndpoints(l.Node2.Pods...), []discoveryv1.EndpointPort{
		{Name: ptr.To("web"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8080)},
		{Name: ptr.To("dns"), Protocol: ptr.To(v1.ProtocolUDP), Port: ptr.To[int32](80)},
	})
	client := l.Node1.Pods[0].NS
	forEachFamily(t, func(t *testing.T, fam v1.IPFamily) {
		for _, proto := range tcpUDP {
			to := netip.AddrPortFrom(clusterIP(t, svc, fam), 90)
			waitAnswered(ctx, t, p, client, proto, to, podIs(l.Node2.Pods[0].Name, l.Node2.Pods[1].Name))
		}
	})
}

// TestNoEndpoints: a Service without endpoints rejects (TCP RST / ICMP unreachable,
// seen as Refused) for TCP and UDP. In nftables mode also, as upstream's
// cluster-ips-check chain: a port the Service does not have is rejected, and an
// unallocated address of the service CIDR is dropped.
func TestNoEndpoints(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	ctx := testCtx(t, 90*time.Second)
	empty := createService(ctx, t, l, "noeps", func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{
			svcPort("tcp", v1.ProtocolTCP, 80, 80),
			svcPort("udp", v1.ProtocolUDP, 80, 80),
		}
	}, nil, nil)
	withEps := createService(ctx, t, l, "noeps-port", nil, lab.PodEndpoints(l.Node2.Pods...), nil)
	client := l.Node1.Pods[0].NS
	forEachFamily(t, func(t *testing.T, fam v1.IPFamily) {
		ip := clusterIP(t, withEps, fam)
		waitAnswered(ctx, t, p, client, v1.ProtocolTCP, netip.AddrPortFrom(ip, 80), nil)
		t.Run("no-endpoints-rejected", func(t *testing.T) {
			for _, proto := range tcpUDP {
				to := netip.AddrPortFrom(clusterIP(t, empty, fam), 80)
				waitOutcome(ctx, t, p, client, proto, to, lab.Refused)
				res := client.ProbeWith(ctx, lab.Probe{Protocol: proto, Target: to, Timeout: outcomeTimeout(proto, to, lab.Refused)})
				if bound := refuseBound(proto, to); res.Outcome != lab.Refused || res.Elapsed > bound {
					t.Errorf("%s: %s after %s, want refused within %s", flow(client, proto, to), res, res.Elapsed, bound)
				}
			}
		})
		t.Run("unallocated-address-dropped", func(t *testing.T) {
			skipInIPTablesMode(t, "upstream's iptables mode has no ServiceCIDR check: traffic to an unallocated service address is routed like any other")
			skipInIPVSMode(t, "upstream's ipvs mode has no ServiceCIDR check: traffic to an unallocated service address is routed like any other")
			unallocated := unallocatedServiceIP(t, fam, empty, withEps)
			for _, proto := range tcpUDP {
				waitOutcome(ctx, t, p, client, proto, netip.AddrPortFrom(unallocated, 80), lab.TimedOut)
			}
		})
		t.Run("unknown-port-rejected", func(t *testing.T) {
			skipInIPTablesMode(t, "upstream's iptables mode does not reject a ClusterIP's ports the Service lacks: that traffic is routed like any other")
			for _, proto := range tcpUDP {
				expectOutcome(ctx, t, p, client, proto, netip.AddrPortFrom(ip, 81), lab.Refused)
			}
		})
	})
}

// skipInIPTablesMode skips t in iptables mode, for a behaviour only upstream's
// nftables mode has.
func skipInIPTablesMode(t *testing.T, why string) {
	t.Helper()
	if iptablesMode() {
		t.Skip("nftables mode only: " + why)
	}
}

// unallocatedServiceIP returns an address near the end of the service CIDR that the
// given Services do not use (the lab allocates few addresses, randomly).
func unallocatedServiceIP(t *testing.T, fam v1.IPFamily, svcs ...*v1.Service) netip.Addr {
	t.Helper()
	used := map[netip.Addr]bool{}
	list, err := suite.Lab(t).Client.CoreV1().Services("").List(testCtx(t, 10*time.Second), listAll)
	if err != nil {
		t.Fatalf("listing services: %v", err)
	}
	for _, s := range list.Items {
		for _, ip := range s.Spec.ClusterIPs {
			if a, err := netip.ParseAddr(ip); err == nil {
				used[a] = true
			}
		}
	}
	for i := 0; i < 50; i++ {
		var a netip.Addr
		if fam == v1.IPv4Protocol {
			a = netip.MustParseAddr(fmt.Sprintf("10.96.255.%d", 250-i))
		} else {
			a = netip.MustParseAddr(fmt.Sprintf("fd00:10:96::%x", 0xfff0-i))
		}
		if !used[a] {
			return a
		}
	}
	t.Fatal("no unallocated service address found")
	return netip.Addr{}
}

// TestClusterIPFromNode: traffic the node itself sends to a ClusterIP (a hostNetwork
// pod, the kubelet) is DNATed in the output hook and reaches the endpoints, on this
// node and on the other one.
func TestClusterIPFromNode(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	ctx := testCtx(t, 60*time.Second)
	svc := createService(ctx, t, l, "cip-node", func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{svcPort("tcp", v1.ProtocolTCP, 80, 8080), svcPort("udp", v1.ProtocolUDP, 80, 8080)}
	}, lab.PodEndpoints(l.Node1.Pods[0], l.Node2.Pods[0]), nil)
	node := l.Node1.NS
	forEachFamily(t, func(t *testing.T, fam v1.IPFamily) {
		to := netip.AddrPortFrom(clusterIP(t, svc, fam), 80)
		for _, proto := range tcpUDP {
			waitAnswered(ctx, t, p, node, proto, to, nil)
			replies := collect(ctx, t, p, node, proto, to, 20)
			onlyFrom(t, flow(node, proto, to), replies, podNames(l.Node1.Pods[0], l.Node2.Pods[0]))
			if got := answeringPods(replies); len(got) != 2 {
				t.Errorf("%s: 20 probes reached %v, want both endpoints", flow(node, proto, to), got)
			}
		}
	})
}
