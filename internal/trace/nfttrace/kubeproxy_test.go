package nfttrace

import (
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/trace"
)

// kubeProxyRuleset is shaped like the ruleset upstream kube-proxy's nftables mode
// writes (same chain layout and rule vocabulary), for two services:
//   - svc1 172.30.0.41:80/tcp, endpoints 10.180.0.1:80 and 10.180.0.2:80, NodePort 3001,
//     LoadBalancer 1.2.3.4 with source ranges 203.0.113.0/25;
//   - svc2 172.30.0.42:80/tcp with no endpoints (REJECT).
const kubeProxyRuleset = `
add table ip kube-proxy
add chain ip kube-proxy filter-prerouting-pre-dnat { type filter hook prerouting priority -110 ; }
add chain ip kube-proxy filter-output-pre-dnat { type filter hook output priority -110 ; }
add chain ip kube-proxy filter-input { type filter hook input priority 0 ; }
add chain ip kube-proxy filter-forward { type filter hook forward priority 0 ; }
add chain ip kube-proxy filter-output { type filter hook output priority 0 ; }
add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; }
add chain ip kube-proxy nat-output { type nat hook output priority -100 ; }
add chain ip kube-proxy nat-postrouting { type nat hook postrouting priority 100 ; }
add chain ip kube-proxy services
add chain ip kube-proxy masquerading
add chain ip kube-proxy mark-for-masquerade
add chain ip kube-proxy reject-chain
add chain ip kube-proxy service-endpoints-check
add chain ip kube-proxy nodeport-endpoints-check
add chain ip kube-proxy cluster-ips-check
add chain ip kube-proxy firewall-check
add chain ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80
add chain ip kube-proxy external-ULMVA6XW-ns1/svc1/tcp/p80
add chain ip kube-proxy firewall-ULMVA6XW-ns1/svc1/tcp/p80
add chain ip kube-proxy endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80
add chain ip kube-proxy endpoint-5OJB2KTZ-ns1/svc1/tcp/p80__10.180.0.2/80

add set ip kube-proxy cluster-ips { type ipv4_addr ; }
add set ip kube-proxy nodeport-ips { type ipv4_addr ; }
add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }
add map ip kube-proxy service-nodeports { type inet_proto . inet_service : verdict ; }
add map ip kube-proxy no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict ; }
add map ip kube-proxy no-endpoint-nodeports { type inet_proto . inet_service : verdict ; }
add map ip kube-proxy firewall-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }

add element ip kube-proxy cluster-ips { 172.30.0.41 }
add element ip kube-proxy cluster-ips { 172.30.0.42 }
add element ip kube-proxy nodeport-ips { 192.168.0.2 }
add element ip kube-proxy service-ips { 172.30.0.41 . tcp . 80 : goto service-ULMVA6XW-ns1/svc1/tcp/p80 }
add element ip kube-proxy service-ips { 1.2.3.4 . tcp . 80 : goto external-ULMVA6XW-ns1/svc1/tcp/p80 }
add element ip kube-proxy service-nodeports { tcp . 3001 : goto external-ULMVA6XW-ns1/svc1/tcp/p80 }
add element ip kube-proxy no-endpoint-services { 172.30.0.42 . tcp . 80 : goto reject-chain }
add element ip kube-proxy firewall-ips { 1.2.3.4 . tcp . 80 : goto firewall-ULMVA6XW-ns1/svc1/tcp/p80 }

add rule ip kube-proxy filter-prerouting-pre-dnat ct state new jump firewall-check
add rule ip kube-proxy filter-output-pre-dnat ct state new jump firewall-check
add rule ip kube-proxy filter-input ct state new jump nodeport-endpoints-check
add rule ip kube-proxy filter-input ct state new jump service-endpoints-check
add rule ip kube-proxy filter-forward ct state new jump service-endpoints-check
add rule ip kube-proxy filter-forward ct state new jump cluster-ips-check
add rule ip kube-proxy filter-output ct state new jump service-endpoints-check
add rule ip kube-proxy filter-output ct state new jump cluster-ips-check
add rule ip kube-proxy nat-prerouting jump services
add rule ip kube-proxy nat-output jump services
add rule ip kube-proxy nat-postrouting jump masquerading
add rule ip kube-proxy masquerading mark and 0x4000 != 0 mark set mark xor 0x4000 masquerade fully-random
add rule ip kube-proxy mark-for-masquerade mark set mark or 0x4000
add rule ip kube-proxy reject-chain reject
add rule ip kube-proxy cluster-ips-check ip daddr @cluster-ips reject
add rule ip kube-proxy firewall-check ip daddr . meta l4proto . th dport vmap @firewall-ips
add rule ip kube-proxy service-endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services
add rule ip kube-proxy nodeport-endpoints-check ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports
add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips
add rule ip kube-proxy services fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports

add rule ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 ip daddr 172.30.0.41 tcp dport 80 ip saddr != 10.0.0.0/8 jump mark-for-masquerade
add rule ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 numgen random mod 2 vmap { 0 : goto endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 , 1 : goto endpoint-5OJB2KTZ-ns1/svc1/tcp/p80__10.180.0.2/80 }
add rule ip kube-proxy external-ULMVA6XW-ns1/svc1/tcp/p80 jump mark-for-masquerade
add rule ip kube-proxy external-ULMVA6XW-ns1/svc1/tcp/p80 goto service-ULMVA6XW-ns1/svc1/tcp/p80
add rule ip kube-proxy firewall-ULMVA6XW-ns1/svc1/tcp/p80 ip saddr != { 203.0.113.0/25 } drop
add rule ip kube-proxy endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 ip saddr 10.180.0.1 jump mark-for-masquerade
add rule ip kube-proxy endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 meta l4proto tcp dnat to 10.180.0.1:80
add rule ip kube-proxy endpoint-5OJB2KTZ-ns1/svc1/tcp/p80__10.180.0.2/80 ip saddr 10.180.0.2 jump mark-for-masquerade
add rule ip kube-proxy endpoint-5OJB2KTZ-ns1/svc1/tcp/p80__10.180.0.2/80 meta l4proto tcp dnat to 10.180.0.2:80
`

func TestKubeProxyShapedRuleset(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, "kube-proxy")
	if err := nft.ParseDump(kubeProxyRuleset); err != nil {
		t.Fatal(err)
	}
	tr, err := New(nft, []string{"192.168.0.2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	both := "10.180.0.1:80, 10.180.0.2:80"
	for _, tc := range []struct {
		name   string
		pkt    trace.Packet
		output string
		masq   bool
	}{
		{"pod to cluster IP", trace.Packet{SourceIP: "10.0.0.2", DestIP: "172.30.0.41", DestPort: 80}, both, false},
		{"external to cluster IP", trace.Packet{SourceIP: "192.168.0.99", DestIP: "172.30.0.41", DestPort: 80}, both, true},
		{"node to cluster IP", trace.Packet{SourceIP: "192.168.0.2", DestIP: "172.30.0.41", DestPort: 80, LocallyGenerated: true}, both, true},
		{"cluster IP wrong port", trace.Packet{SourceIP: "10.0.0.2", DestIP: "172.30.0.41", DestPort: 81}, "REJECT", false},
		{"cluster IP udp", trace.Packet{SourceIP: "10.0.0.2", DestIP: "172.30.0.41", Protocol: "udp", DestPort: 80}, "REJECT", false},
		{"no endpoints", trace.Packet{SourceIP: "10.0.0.2", DestIP: "172.30.0.42", DestPort: 80}, "REJECT", false},
		{"no endpoints from node", trace.Packet{SourceIP: "192.168.0.2", DestIP: "172.30.0.42", DestPort: 80, LocallyGenerated: true}, "REJECT", false},
		{"nodeport", trace.Packet{SourceIP: "192.168.0.99", DestIP: "192.168.0.2", DestPort: 3001}, both, true},
		{"nodeport wrong port goes to the node", trace.Packet{SourceIP: "192.168.0.99", DestIP: "192.168.0.2", DestPort: 3002}, "ACCEPT", false},
		{"load balancer allowed source", trace.Packet{SourceIP: "203.0.113.5", DestIP: "1.2.3.4", DestPort: 80}, both, true},
		{"load balancer denied source", trace.Packet{SourceIP: "203.0.113.200", DestIP: "1.2.3.4", DestPort: 80}, "DROP", false},
		{"established skips nat and checks", trace.Packet{SourceIP: "10.0.0.2", DestIP: "172.30.0.42", DestPort: 80, CTState: "established"}, "ACCEPT", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tr.Trace(tc.pkt)
			if err != nil {
				t.Fatal(err)
			}
			if res.Output() != tc.output || res.Masquerade != tc.masq {
				t.Errorf("got %q masq %v, want %q masq %v\n%s", res.Output(), res.Masquerade, tc.output, tc.masq, res.TraceString())
			}
		})
	}

	// Hairpin: endpoint 10.180.0.1 reaching its own service is masqueraded only on
	// the path that picks itself.
	res, err := tr.Trace(trace.Packet{SourceIP: "10.180.0.1", DestIP: "172.30.0.41", DestPort: 80})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Outcomes {
		if want := o.DNAT == "10.180.0.1:80"; o.Masquerade != want {
			t.Errorf("hairpin outcome %s: masquerade %v, want %v\n%v", o.DNAT, o.Masquerade, want, o.Trace)
		}
		// numgen random mod 2: each endpoint gets half of the connections.
		if o.Probability != 0.5 {
			t.Errorf("outcome %s: probability %g, want 0.5", o.DNAT, o.Probability)
		}
	}
}
