package smoke

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/test/lab"
)

var protocols = []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP}

// expectAnswer probes target from ns and checks who answered and which client
// address it saw.
func expectAnswer(t *testing.T, ns *lab.NS, proto v1.Protocol, target netip.AddrPort, wantPod string, wantClient netip.Addr) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r := ns.Probe(ctx, proto, target)
	if r.Outcome != lab.Answered {
		t.Errorf("%s %s -> %s: %v (err %v)", proto, ns, target, r.Outcome, r.Err)
		return
	}
	if r.Reply.Pod != wantPod || r.Reply.Client.Addr() != wantClient {
		t.Errorf("%s %s -> %s: answered %q seeing client %s, want %q seeing %s", proto, ns, target, r.Reply.Pod, r.Reply.Client, wantPod, wantClient)
	}
}

func TestPodToPod(t *testing.T) {
	l := suite.Lab(t)
	n1, n2 := l.Node1.Pods, l.Node2.Pods
	pairs := []struct {
		name     string
		from, to *lab.Pod
	}{
		{"node1 pod to node1 pod", n1[0], n1[1]},
		{"node1 pod to node2 pod", n1[0], n2[0]},
		{"node2 pod to node1 pod", n2[0], n1[1]},
		{"node2 pod to node2 pod", n2[1], n2[0]},
	}
	for _, p := range pairs {
		for _, fam := range lab.Families {
			for _, proto := range protocols {
				for _, port := range []uint16{80, 8080} {
					t.Run(fmt.Sprintf("%s/%s/%s/%d", p.name, fam, proto, port), func(t *testing.T) {
						expectAnswer(t, p.from.NS, proto, netip.AddrPortFrom(p.to.IPs.Get(fam), port), p.to.Name, p.from.IPs.Get(fam))
					})
				}
			}
		}
	}
}

func TestClosedPortRefused(t *testing.T) {
	l := suite.Lab(t)
	from, to := l.Node1.Pods[0], l.Node2.Pods[0]
	ctx := context.Background()
	for _, fam := range lab.Families {
		for _, proto := range protocols {
			// Many in a row: no ICMP rate limit may turn a refusal into a timeout.
			for i := 0; i < 20; i++ {
				r := from.NS.Probe(ctx, proto, netip.AddrPortFrom(to.IPs.Get(fam), 81))
				if r.Outcome != lab.Refused {
					t.Fatalf("%s %s probe %d to closed port: %v", fam, proto, i, r)
				}
			}
		}
	}
}

func TestExternalClient(t *testing.T) {
	l := suite.Lab(t)
	ctx := context.Background()
	// A host-network listener on node1, as a NodePort/host service would be.
	for _, proto := range protocols {
		s, err := l.Serve(ctx, l.Node1.NS, "node1-host", lab.BackendPort{Protocol: proto, Port: 9000})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
	}
	for _, fam := range lab.Families {
		extIP := l.Plan.ExtIPs.Get(fam)
		for _, proto := range protocols {
			t.Run(fmt.Sprintf("%s/%s/node1 external address", fam, proto), func(t *testing.T) {
				expectAnswer(t, l.Ext, proto, netip.AddrPortFrom(l.Plan.Node1ExtIPs.Get(fam), 9000), "node1-host", extIP)
			})
			t.Run(fmt.Sprintf("%s/%s/node1 node address", fam, proto), func(t *testing.T) {
				expectAnswer(t, l.Ext, proto, netip.AddrPortFrom(l.Node1.IPs.Get(fam), 9000), "node1-host", extIP)
			})
			for _, pod := range []*lab.Pod{l.Node1.Pods[0], l.Node2.Pods[0]} {
				t.Run(fmt.Sprintf("%s/%s/routed to %s", fam, proto, pod.Name), func(t *testing.T) {
					expectAnswer(t, l.Ext, proto, netip.AddrPortFrom(pod.IPs.Get(fam), 80), pod.Name, extIP)
				})
			}
			t.Run(fmt.Sprintf("%s/%s/pod to node1 host", fam, proto), func(t *testing.T) {
				pod := l.Node2.Pods[0]
				expectAnswer(t, pod.NS, proto, netip.AddrPortFrom(l.Node1.IPs.Get(fam), 9000), "node1-host", pod.IPs.Get(fam))
			})
		}
	}
}
