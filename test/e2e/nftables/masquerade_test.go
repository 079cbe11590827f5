package nftables

import (
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
)

// TestHairpin: a pod reaching itself through its own Service is answered, and sees a
// masqueraded source (not its own address).
func TestHairpin(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	ctx := testCtx(t, 60*time.Second)
	self := l.Node1.Pods[2]
	svc := createService(ctx, t, l, "hairpin", func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{
			svcPort("tcp", v1.ProtocolTCP, 80, 80),
			svcPort("udp", v1.ProtocolUDP, 80, 80),
		}
	}, lab.PodEndpoints(self), nil)
	forEachFamily(t, func(t *testing.T, fam v1.IPFamily) {
		for _, proto := range tcpUDP {
			to := netip.AddrPortFrom(clusterIP(t, svc, fam), 80)
			r := waitAnswered(ctx, t, p, self.NS, proto, to, podIs(self.Name))
			if r.Client.Addr() == self.IPs.Get(fam) {
				t.Errorf("%s: the pod saw its own address %s as client, want a masqueraded source", flow(self.NS, proto, to), r.Client.Addr())
			}
		}
	})
}

// masqCase is one client of a ClusterIP and whether the proxy must masquerade it.
type masqCase struct {
	what   string
	client *lab.NS
	own    lab.Dual[netip.Addr] // the client's address
	masq   bool
}

// checkMasquerade probes the ClusterIP of svc (TCP and UDP) from every case and
// checks whether the backend saw the client's own address.
func checkMasquerade(t *testing.T, p *proxytest.Proxy, svc *v1.Service, cases []masqCase) {
	t.Helper()
	ctx := testCtx(t, 60*time.Second)
	forEachFamily(t, func(t *testing.T, fam v1.IPFamily) {
		for _, c := range cases {
			for _, proto := range tcpUDP {
				to := netip.AddrPortFrom(clusterIP(t, svc, fam), 80)
				r := waitAnswered(ctx, t, p, c.client, proto, to, nil)
				own := c.own.Get(fam)
				switch {
				case c.masq && r.Client.Addr() == own:
					t.Errorf("%s (%s): backend %s saw the client's own %s, want it masqueraded\n%s", flow(c.client, proto, to), c.what, r.Pod, own, dumpRules(p))
				case !c.masq && r.Client.Addr() != own:
					t.Errorf("%s (%s): backend %s saw %s, want the client's own %s (no masquerade)\n%s", flow(c.client, proto, to), c.what, r.Pod, r.Client.Addr(), own, dumpRules(p))
				}
			}
		}
	})
}

func masqService(t *testing.T, p *proxytest.Proxy, name string, backend *lab.Pod) *v1.Service {
	ctx := testCtx(t, 30*time.Second)
	return createService(ctx, t, p.Lab, name, func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{
			svcPort("tcp", v1.ProtocolTCP, 80, 80),
			svcPort("udp", v1.ProtocolUDP, 80, 80),
		}
	}, lab.PodEndpoints(backend), nil)
}

// TestMasqueradeAndLocalDetectors: which ClusterIP traffic the proxy masquerades,
// under the default detector (ClusterCIDR), masqueradeAll, NodeCIDR and
// InterfaceNamePrefix. The backend is node1-pod2; the clients are node1-pod1 (local
// by every detector), node2-pod1 (in the cluster CIDR, but neither in node1's pod
// CIDR nor behind a node1 pod interface) and Ext (outside the cluster).
func TestMasqueradeAndLocalDetectors(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	backend := l.Node1.Pods[1]
	podClient := func(pod *lab.Pod, masq bool) masqCase {
		return masqCase{pod.Name, pod.NS, pod.IPs, masq}
	}
	ext := func() masqCase { return masqCase{"external client", l.Ext, l.Plan.ExtIPs, true} }
	cases := []struct {
		name  string
		extra string // proxy configuration; "" is the shared proxy
		skip  string
		want  []masqCase
	}{
		{"ClusterCIDR-default", "", "", []masqCase{podClient(l.Node1.Pods[0], false), podClient(l.Node2.Pods[0], false), ext()}},
		{"masqueradeAll", "iptables:\n  masqueradeAll: true\nnftables:\n  masqueradeAll: true\n", "",
			[]masqCase{podClient(l.Node1.Pods[0], true), podClient(l.Node2.Pods[0], true), ext()}},
		{"NodeCIDR", "detectLocalMode: NodeCIDR\n", "",
			[]masqCase{podClient(l.Node1.Pods[0], false), podClient(l.Node2.Pods[0], true), ext()}},
		{"InterfaceNamePrefix", "detectLocalMode: InterfaceNamePrefix\ndetectLocal:\n  interfaceNamePrefix: vpod\n", "",
			[]masqCase{podClient(l.Node1.Pods[0], false), podClient(l.Node2.Pods[0], true), ext()}},
		{"BridgeInterface", "", "the lab's pods hang off point-to-point veths on node1, not a bridge, so no bridge interface exists to detect local traffic by", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.skip != "" {
				t.Skip(c.skip)
			}
			if c.extra == "" {
				checkMasquerade(t, p, masqService(t, p, "masq-default", backend), c.want)
				return
			}
			o := defaultOptions()
			o.Name = "kube-proxy-" + c.name
			o.ExtraConfig = c.extra
			withProxy(t, o, func(p *proxytest.Proxy) {
				checkMasquerade(t, p, masqService(t, p, "masq-"+lowerName(c.name), backend), c.want)
			})
		})
	}
}

func lowerName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
