package nftables

import (
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kproxy/kproxy/test/lab"
)

// TestSessionAffinityClientIP: repeated probes from one client reach one pod.
func TestSessionAffinityClientIP(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	ctx := testCtx(t, 60*time.Second)
	svc := createService(ctx, t, l, "affinity", func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{
			svcPort("tcp", v1.ProtocolTCP, 80, 80),
			svcPort("udp", v1.ProtocolUDP, 80, 80),
		}
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
	}, lab.PodEndpoints(l.Pods...), nil)
	forEachFamily(t, func(t *testing.T, fam v1.IPFamily) {
		for _, proto := range tcpUDP {
			to := netip.AddrPortFrom(clusterIP(t, svc, fam), 80)
			// Not from node2's pods: node2 runs no proxy, so their un-masqueraded flows to node2
			// endpoints would return asymmetrically and never answer.
			for _, client := range []*lab.NS{l.Node1.Pods[0].NS, l.Ext} {
				waitAnswered(ctx, t, p, client, proto, to, nil)
				replies := collect(ctx, t, p, client, proto, to, 15)
				if got := answeringPods(replies); len(got) != 1 {
					t.Errorf("%s: 15 probes reached %v, want one pod (ClientIP affinity)\n%s", flow(client, proto, to), got, dumpRules(p))
				}
			}
		}
	})
}

// TestInternalTrafficPolicyLocal: from a node1 pod, only node1's endpoints answer;
// with none on node1, ClusterIP traffic is dropped.
func TestInternalTrafficPolicyLocal(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	ctx := testCtx(t, 60*time.Second)
	local := ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	ports := func(s *v1.Service) {
		s.Spec.InternalTrafficPolicy = local
		s.Spec.Ports = []v1.ServicePort{
			svcPort("tcp", v1.ProtocolTCP, 80, 80),
			svcPort("udp", v1.ProtocolUDP, 80, 80),
		}
	}
	svc := createService(ctx, t, l, "itp-local", ports, lab.PodEndpoints(l.Pods...), nil)
	none := createService(ctx, t, l, "itp-local-none", ports, lab.PodEndpoints(l.Node2.Pods...), nil)
	client := l.Node1.Pods[0].NS
	forEachFamily(t, func(t *testing.T, fam v1.IPFamily) {
		for _, proto := range tcpUDP {
			to := netip.AddrPortFrom(clusterIP(t, svc, fam), 80)
			waitAnswered(ctx, t, p, client, proto, to, nil)
			replies := collect(ctx, t, p, client, proto, to, 20)
			onlyFrom(t, flow(client, proto, to), replies, podNames(l.Node1.Pods...))
			if got := answeringPods(replies); len(got) < 2 {
				t.Errorf("%s: reached %v, want several of node1's endpoints", flow(client, proto, to), got)
			}
			noneIP := netip.AddrPortFrom(clusterIP(t, none, fam), 80)
			if ipvsMode() {
				// Upstream's ipvs mode programs the virtual server with no real
				// server (a ClusterIP-only Service has no cluster endpoints to fall
				// back to): IPVS answers ICMP port unreachable, rate-limited.
				waitNotAnswered(ctx, t, p, client, proto, noneIP)
				continue
			}
			waitOutcome(ctx, t, p, client, proto, noneIP, lab.TimedOut)
		}
	})
}

// TestSessionAffinitySurvivesRestart: the first (full) sync of a restarted proxy
// keeps the kernel's session-affinity memory, as upstream's does: every client
// stays with its pod.
func TestSessionAffinitySurvivesRestart(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	ctx := testCtx(t, 90*time.Second)
	svc := createService(ctx, t, l, "affinity-restart", func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{svcPort("tcp", v1.ProtocolTCP, 80, 80)}
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](300)}}
	}, lab.PodEndpoints(l.Pods...), nil)
	type flowKey struct {
		client *lab.NS
		to     netip.AddrPort
	}
	// With ten pods, a proxy that forgot the memory keeps all four flows on their
	// pods with a chance of 1 in 10,000.
	pods := map[flowKey]string{}
	for _, fam := range lab.Families {
		to := netip.AddrPortFrom(clusterIP(t, svc, fam), 80)
		for _, client := range []*lab.NS{l.Node1.Pods[0].NS, l.Ext} {
			pods[flowKey{client, to}] = waitAnswered(ctx, t, p, client, v1.ProtocolTCP, to, nil).Pod
		}
	}
	p = restartProxy(t)
	if err := p.WaitSynced(ctx, syncTimeout); err != nil {
		t.Fatal(err)
	}
	for k, pod := range pods {
		if r := waitAnswered(ctx, t, p, k.client, v1.ProtocolTCP, k.to, nil); r.Pod != pod {
			t.Errorf("%s: answered by %s after the proxy restarted, by %s before: the affinity memory was lost\n%s",
				flow(k.client, v1.ProtocolTCP, k.to), r.Pod, pod, dumpRules(p))
		}
	}
}
