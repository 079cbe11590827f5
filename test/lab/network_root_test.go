package lab

import (
	"context"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/testing/roottest"
)

// TestNetworkOnly builds a lab without control plane, probes across it and checks that
// Close removes everything.
func TestNetworkOnly(t *testing.T) {
	roottest.Require(t, "creates network namespaces", "ip")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := New(Options{SkipControlPlane: true, Node1Pods: 2, Node2Pods: 1})
	t.Cleanup(func() { _ = l.Close() })
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("network-only lab started in %s", l.StartDuration)
	from, to := l.Node1.Pods[0], l.Node2.Pods[0]
	for _, fam := range Families {
		for _, proto := range []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP} {
			r := from.NS.Probe(ctx, proto, netip.AddrPortFrom(to.IPs.Get(fam), 80))
			if r.Outcome != Answered || r.Reply.Pod != to.Name || r.Reply.Client.Addr() != from.IPs.Get(fam) {
				t.Errorf("%s %s %s -> %s: %v", fam, proto, from.Name, to.Name, r)
			}
			// A closed port is refused, quickly (no ICMP rate limit).
			r = from.NS.Probe(ctx, proto, netip.AddrPortFrom(to.IPs.Get(fam), 81))
			if r.Outcome != Refused {
				t.Errorf("%s %s closed port: %v", fam, proto, r)
			}
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Leftovers(ctx); err != nil {
		t.Fatal(err)
	}
}
