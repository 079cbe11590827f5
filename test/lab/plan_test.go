package lab

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestNewPlan(t *testing.T) {
	p, err := NewPlan(3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Nodes) != 2 || len(p.Nodes[0].Pods) != 3 || len(p.Nodes[1].Pods) != 2 {
		t.Fatalf("unexpected shape: %+v", p)
	}
	tests := []struct {
		name string
		got  netip.Addr
		want string
	}{
		{"node1 v4", p.Nodes[0].IPs.V4, "192.0.2.1"},
		{"node1 v6", p.Nodes[0].IPs.V6, "2001:db8:1::1"},
		{"node2 v4", p.Nodes[1].IPs.V4, "192.0.2.2"},
		{"node2 v6", p.Nodes[1].IPs.V6, "2001:db8:1::2"},
		{"node1 gw", p.Nodes[0].PodGatewayV4, "10.244.1.1"},
		{"node1 pod1 v4", p.Nodes[0].Pods[0].IPs.V4, "10.244.1.2"},
		{"node1 pod3 v6", p.Nodes[0].Pods[2].IPs.V6, "fd00:10:244:1::4"},
		{"node2 pod2 v4", p.Nodes[1].Pods[1].IPs.V4, "10.244.2.3"},
		{"node2 pod2 v6", p.Nodes[1].Pods[1].IPs.V6, "fd00:10:244:2::3"},
		{"node1 ext v4", p.Node1ExtIPs.V4, "203.0.113.1"},
		{"ext v6", p.ExtIPs.V6, "2001:db8:2::2"},
		{"lb v6", LoadBalancerIP(v1.IPv6Protocol, 7), "2001:db8:3::7"},
	}
	for _, tc := range tests {
		if tc.got.String() != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, tc.got, tc.want)
		}
	}
	if got := p.Nodes[1].PodCIDRs.V6.String(); got != "fd00:10:244:2::/64" {
		t.Errorf("node2 pod CIDR v6: %s", got)
	}
	for _, n := range p.Nodes {
		for _, pod := range n.Pods {
			for _, fam := range Families {
				if !n.PodCIDRs.Get(fam).Contains(pod.IPs.Get(fam)) || !ClusterCIDRs.Get(fam).Contains(pod.IPs.Get(fam)) {
					t.Errorf("%s %s not in its CIDRs", pod.Name, pod.IPs.Get(fam))
				}
			}
			if len(pod.HostIf) > 15 {
				t.Errorf("interface name %q too long", pod.HostIf)
			}
		}
	}
	if _, err := NewPlan(MaxPodsPerNode+1, 0); err == nil {
		t.Error("expected error for too many pods")
	}
}
