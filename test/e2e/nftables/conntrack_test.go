package nftables

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/test/lab"
)

// TestStaleUDPConntrack: a UDP client that keeps sending from one source port to a
// ClusterIP reaches the new endpoint once the old one is replaced (the proxy deletes
// the conntrack entries pointing at removed UDP endpoints; otherwise the entry would
// keep the flow on the old pod, which still answers here).
func TestStaleUDPConntrack(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	ctx := testCtx(t, 90*time.Second)
	oldPod, newPod := l.Node2.Pods[0], l.Node2.Pods[1]
	svc := createService(ctx, t, l, "stale-udp", func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{svcPort("udp", v1.ProtocolUDP, 80, 80)}
	}, lab.PodEndpoints(oldPod), nil)
	client := l.Node1.Pods[0]
	type udpFlow struct {
		what  string
		probe func(ctx context.Context) lab.ProbeResult
	}
	flows := map[v1.IPFamily]udpFlow{}
	for i, fam := range lab.Families {
		// A fixed source port per family, reused by every probe of the flow.
		src := netip.AddrPortFrom(client.IPs.Get(fam), uint16(40100+i))
		to := netip.AddrPortFrom(clusterIP(t, svc, fam), 80)
		flows[fam] = udpFlow{
			what: fmt.Sprintf("UDP %s -> %s", src, to),
			probe: func(ctx context.Context) lab.ProbeResult {
				return client.NS.ProbeWith(ctx, lab.Probe{Protocol: v1.ProtocolUDP, Target: to, Source: src, Timeout: probeTimeout})
			},
		}
	}
	answeredBy := func(f udpFlow, pod string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			if r := f.probe(ctx); r.Outcome != lab.Answered || r.Reply.Pod != pod {
				return fmt.Errorf("probe: %s", r)
			}
			return nil
		}
	}
	for _, fam := range lab.Families {
		if err := p.WaitFor(ctx, flows[fam].what+" answered by "+oldPod.Name, syncTimeout, answeredBy(flows[fam], oldPod.Name)); err != nil {
			t.Fatal(err)
		}
	}
	setEndpoints(ctx, t, l, svc, lab.PodEndpoints(newPod), nil)
	forEachFamily(t, func(t *testing.T, fam v1.IPFamily) {
		// Keep sending from the same port: the conntrack entry never idles out.
		if err := p.WaitFor(ctx, flows[fam].what+" answered by the new endpoint "+newPod.Name, 15*time.Second, answeredBy(flows[fam], newPod.Name)); err != nil {
			out, _ := l.Node1.NS.Run(ctx, "conntrack", "-L", "-p", "udp")
			t.Fatalf("%v\nconntrack -L -p udp in node1:\n%s\n%s", err, out, dumpRules(p))
		}
	})
}
