package nfttrace

import (
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/trace"
)

// traceCase is one packet traced through baseChains plus rules.
type traceCase struct {
	name   string
	rules  string       // appended to baseChains
	pkt    trace.Packet // zero fields default from defaultPacket
	want   trace.Verdict
	dnat   []string
	masq   bool
	mark   *uint32 // final mark of every outcome, when set
	traced string  // a substring the trace must contain, when set
}

func runTraceCases(t *testing.T, family knftables.Family, local []string, defaults trace.Packet, cases []traceCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nft := newFake(t, family, baseChains+tc.rules)
			p := tc.pkt
			if p.SourceIP == "" {
				p.SourceIP = defaults.SourceIP
			}
			if p.DestIP == "" {
				p.DestIP = defaults.DestIP
			}
			if p.DestPort == 0 {
				p.DestPort = defaults.DestPort
			}
			if p.InputInterface == "" && !p.LocallyGenerated {
				p.InputInterface = defaults.InputInterface
			}
			res := mustTrace(t, nft, local, p)
			want := tc.want
			if want == "" {
				want = trace.Accept
			}
			if res.Verdict != want || !slices.Equal(res.DNATTargets, tc.dnat) || res.Masquerade != tc.masq {
				t.Errorf("got verdict %s, dnat %v, masq %v; want %s, %v, %v\ntrace:\n%s",
					res.Verdict, res.DNATTargets, res.Masquerade, want, tc.dnat, tc.masq, res.TraceString())
			}
			if tc.mark != nil {
				for _, o := range res.Outcomes {
					if o.Mark != *tc.mark {
						t.Errorf("final mark %#x, want %#x\ntrace:\n%s", o.Mark, *tc.mark, res.TraceString())
					}
				}
			}
			if tc.traced != "" && !strings.Contains(res.TraceString(), tc.traced) {
				t.Errorf("trace does not contain %q:\n%s", tc.traced, res.TraceString())
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

var defaultPacket4 = trace.Packet{SourceIP: "10.0.0.1", DestIP: "172.30.0.1", DestPort: 80, InputInterface: "eth0"}

func TestTraceIPv4(t *testing.T) {
	runTraceCases(t, knftables.IPv4Family, []string{"192.168.0.1"}, defaultPacket4, []traceCase{
		{name: "empty ruleset accepts"},
		{name: "daddr equal", rules: `add rule FAM t forward ip daddr 172.30.0.1 drop`, want: trace.Drop,
			traced: "[forward] ip daddr 172.30.0.1 drop"},
		{name: "daddr explicit ==", rules: `add rule FAM t forward ip daddr == 172.30.0.1 drop`, want: trace.Drop},
		{name: "daddr no match", rules: `add rule FAM t forward ip daddr 172.30.0.2 drop`},
		{name: "daddr != prefix", rules: `add rule FAM t forward ip daddr != 172.30.0.0/16 drop`},
		{name: "daddr != prefix matches", rules: `add rule FAM t forward ip daddr != 10.0.0.0/8 drop`, want: trace.Drop},
		{name: "saddr anonymous set", rules: `add rule FAM t forward ip saddr { 10.0.0.5, 10.0.0.1 } reject`, want: trace.Reject},
		{name: "saddr != anonymous set", rules: `add rule FAM t forward ip saddr != { 10.0.0.0/8, 192.168.0.0/16 } drop`},
		{name: "saddr range", rules: `add rule FAM t forward ip saddr 10.0.0.0-10.0.0.9 drop`, want: trace.Drop},
		{name: "named set with prefix", want: trace.Drop, rules: `
add set FAM t blocked { type ipv4_addr ; flags interval ; }
add element FAM t blocked { 10.0.0.0/24 }
add rule FAM t forward ip saddr @blocked drop`},
		{name: "named set != ", rules: `
add set FAM t blocked { type ipv4_addr ; }
add element FAM t blocked { 10.9.9.9 }
add rule FAM t forward ip saddr != @blocked drop`, want: trace.Drop},
		{name: "tcp dport", rules: `add rule FAM t forward tcp dport 80 drop`, want: trace.Drop},
		{name: "tcp dport on udp packet", rules: `add rule FAM t forward tcp dport 80 drop`, pkt: trace.Packet{Protocol: "udp"}},
		{name: "udp dport", rules: `add rule FAM t forward udp dport 53 drop`, pkt: trace.Packet{Protocol: "udp", DestPort: 53}, want: trace.Drop},
		{name: "sctp dport", rules: `add rule FAM t forward sctp dport 80 drop`, pkt: trace.Packet{Protocol: "sctp"}, want: trace.Drop},
		{name: "th dport", rules: `add rule FAM t forward th dport 80 drop`, pkt: trace.Packet{Protocol: "udp"}, want: trace.Drop},
		{name: "th dport on icmp", rules: `add rule FAM t forward th dport 0 drop`, pkt: trace.Packet{Protocol: "icmp"}},
		{name: "tcp dport set", rules: `add rule FAM t forward tcp dport { 443, 80 } drop`, want: trace.Drop},
		{name: "tcp dport range", rules: `add rule FAM t forward tcp dport 1-1024 drop`, want: trace.Drop},
		{name: "tcp dport !=", rules: `add rule FAM t forward tcp dport != 80 drop`},
		{name: "tcp sport", rules: `add rule FAM t forward tcp sport 40000 drop`, pkt: trace.Packet{SourcePort: 40000}, want: trace.Drop},
		{name: "meta l4proto", rules: `add rule FAM t forward meta l4proto udp drop`, pkt: trace.Packet{Protocol: "udp"}, want: trace.Drop},
		{name: "meta l4proto other", rules: `add rule FAM t forward meta l4proto udp drop`},
		{name: "ip protocol", rules: `add rule FAM t forward ip protocol tcp drop`, want: trace.Drop},
		{name: "meta nfproto", rules: `add rule FAM t forward meta nfproto ipv4 drop`, want: trace.Drop},
		{name: "iifname wildcard", rules: `add rule FAM t forward iifname "veth*" drop`, pkt: trace.Packet{InputInterface: "veth1234"}, want: trace.Drop},
		{name: "iifname wildcard no match", rules: `add rule FAM t forward iifname "veth*" drop`},
		{name: "meta iifname !=", rules: `add rule FAM t forward meta iifname != "eth0" drop`},
		{name: "oifname", rules: `add rule FAM t forward oifname "eth1" drop`, pkt: trace.Packet{OutputInterface: "eth1"}, want: trace.Drop},
		{name: "fib daddr type local to input", pkt: trace.Packet{DestIP: "192.168.0.1", DestPort: 22}, want: trace.Reject, rules: `
add rule FAM t input fib daddr type local tcp dport 22 reject with icmp type port-unreachable`},
		{name: "fib daddr type local not for remote", rules: `add rule FAM t forward fib daddr type local drop`},
		{name: "fib saddr type local", pkt: trace.Packet{SourceIP: "192.168.0.1", LocallyGenerated: true}, want: trace.Drop, rules: `
add rule FAM t filter-output fib saddr type local drop`},
		{name: "fib daddr type != local", rules: `add rule FAM t forward fib daddr type != local drop`, want: trace.Drop},
		{name: "ct state invalid", rules: `add rule FAM t forward ct state invalid drop`, pkt: trace.Packet{CTState: "invalid"}, want: trace.Drop},
		{name: "ct state established accepted", pkt: trace.Packet{CTState: "established"}, rules: `
add rule FAM t forward ct state established,related accept
add rule FAM t forward drop`},
		{name: "ct state new dropped", want: trace.Drop, rules: `
add rule FAM t forward ct state { established, related } accept
add rule FAM t forward drop`},
		{name: "ct state new jump", want: trace.Drop, rules: `
add chain FAM t check
add rule FAM t check drop
add rule FAM t forward ct state new jump check`},
		{name: "nat skipped for established", pkt: trace.Packet{CTState: "established"}, rules: `
add rule FAM t prerouting dnat to 10.0.0.5:8080`},
		{name: "ct status dnat", dnat: []string{"10.0.0.5:8080"}, masq: true, rules: `
add rule FAM t prerouting ip daddr 172.30.0.1 dnat to 10.0.0.5:8080
add rule FAM t postrouting ct status dnat masquerade`},
		{name: "ct status dnat without dnat", rules: `add rule FAM t postrouting ct status dnat masquerade`},
		{name: "kube-proxy mark syntax", masq: true, mark: ptrTo[uint32](0), rules: `
add rule FAM t prerouting mark set mark or 0x4000
add rule FAM t postrouting mark and 0x4000 != 0 mark set mark xor 0x4000 masquerade fully-random`},
		{name: "meta mark syntax", masq: true, mark: ptrTo[uint32](0x1), rules: `
add rule FAM t prerouting meta mark set meta mark | 0x4000
add rule FAM t postrouting meta mark & 0x4000 != 0 meta mark set meta mark ^ 0x4000 masquerade random,persistent`,
			pkt: trace.Packet{Mark: 0x1}},
		{name: "mark set literal", mark: ptrTo[uint32](0x10), rules: `add rule FAM t forward meta mark set 0x10`},
		{name: "mark not set no masquerade", rules: `
add rule FAM t postrouting meta mark & 0x4000 == 0x4000 masquerade`},
		{name: "initial mark masquerade", masq: true, pkt: trace.Packet{Mark: 0x4000}, rules: `
add rule FAM t postrouting meta mark & 0x4000 != 0 masquerade`},
		{name: "dnat to ip:port", dnat: []string{"10.0.0.5:8080"}, rules: `add rule FAM t prerouting meta l4proto tcp dnat to 10.0.0.5:8080`},
		{name: "dnat ip to", dnat: []string{"10.0.0.5:8080"}, rules: `add rule FAM t prerouting dnat ip to 10.0.0.5:8080`},
		{name: "dnat addr . port", dnat: []string{"10.0.0.5:8080"}, rules: `add rule FAM t prerouting dnat ip addr . port to 10.0.0.5 . 8080`},
		{name: "dnat without port", dnat: []string{"10.0.0.5"}, rules: `add rule FAM t prerouting dnat to 10.0.0.5`},
		{name: "dnat with anonymous map", dnat: []string{"10.0.0.5:8080"}, rules: `
add rule FAM t prerouting dnat ip addr . port to ip daddr . tcp dport map { 172.30.0.2 . 80 : 10.0.0.6 . 80, 172.30.0.1 . 80 : 10.0.0.5 . 8080 }`},
		{name: "dnat with named map", dnat: []string{"10.0.0.7:9090"}, rules: `
add map FAM t targets { type ipv4_addr : ipv4_addr . inet_service ; }
add element FAM t targets { 172.30.0.1 : 10.0.0.7 . 9090 }
add rule FAM t prerouting dnat ip addr . port to ip daddr map @targets`},
		{name: "dnat map miss", rules: `
add rule FAM t prerouting dnat ip addr . port to ip daddr map { 172.30.0.9 : 10.0.0.6 . 80 }`},
		{name: "dnat numgen map", dnat: []string{"10.0.0.5:80", "10.0.0.6:80", "10.0.0.7:81"}, rules: `
add rule FAM t prerouting meta l4proto tcp dnat ip addr . port to numgen random mod 3 map { 0 : 10.0.0.5 . 80 , 1 : 10.0.0.6 . 80 , 2 : 10.0.0.7 . 81 }`},
		{name: "numgen vmap", dnat: []string{"10.0.0.5:80", "10.0.0.6:80"}, rules: `
add chain FAM t ep1
add chain FAM t ep2
add rule FAM t ep1 dnat to 10.0.0.5:80
add rule FAM t ep2 dnat to 10.0.0.6:80
add rule FAM t prerouting numgen random mod 2 vmap { 0 : goto ep1 , 1 : goto ep2 }`},
		{name: "nested numgen", dnat: []string{"10.0.0.5:80", "10.0.0.6:80", "10.0.0.7:80"}, rules: `
add chain FAM t a
add chain FAM t b
add rule FAM t a numgen random mod 2 offset 1 vmap { 1 : drop, 2 : continue }
add rule FAM t a dnat to 10.0.0.5:80
add rule FAM t b dnat to numgen random mod 2 map { 0 : 10.0.0.6:80, 1 : 10.0.0.7:80 }
add rule FAM t prerouting numgen random mod 2 vmap { 0 : goto a , 1 : goto b }`, want: "ACCEPT,DROP"},
		{name: "verdict map dispatch", dnat: []string{"10.0.0.5:80"}, rules: `
add chain FAM t svc
add rule FAM t svc dnat to 10.0.0.5:80
add map FAM t service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }
add element FAM t service-ips { 172.30.0.1 . tcp . 80 : goto svc }
add element FAM t service-ips { 172.30.0.1 . udp . 80 : drop }
add rule FAM t prerouting ip daddr . meta l4proto . th dport vmap @service-ips`},
		{name: "verdict map dispatch udp", pkt: trace.Packet{Protocol: "udp"}, want: trace.Drop, rules: `
add chain FAM t svc
add map FAM t service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }
add element FAM t service-ips { 172.30.0.1 . tcp . 80 : goto svc }
add element FAM t service-ips { 172.30.0.1 . udp . 80 : drop }
add rule FAM t prerouting ip daddr . meta l4proto . th dport vmap @service-ips`},
		{name: "anonymous vmap", want: trace.Reject, rules: `
add rule FAM t forward tcp dport vmap { 22 : accept, 80 : reject }
add rule FAM t forward drop`},
		{name: "jump then return continues", want: trace.Drop, rules: `
add chain FAM t a
add rule FAM t a return
add rule FAM t a accept
add rule FAM t forward jump a
add rule FAM t forward drop`},
		{name: "goto does not come back", rules: `
add chain FAM t a
add chain FAM t b
add rule FAM t a goto b
add rule FAM t a drop
add rule FAM t forward jump a`},
		{name: "accept ends only its base chain", want: trace.Drop, rules: `
add rule FAM t filter-prerouting accept
add rule FAM t forward drop`},
		{name: "continue", want: trace.Drop, rules: `
add rule FAM t forward continue
add rule FAM t forward drop`},
		{name: "policy drop", want: trace.Drop, rules: `
add chain FAM t strict { type filter hook forward priority 10 ; policy drop ; }`},
		{name: "priority order", want: trace.Reject, rules: `
add chain FAM t early { type filter hook forward priority -5 ; }
add rule FAM t early reject
add rule FAM t forward drop`},
		{name: "reject with tcp reset", want: trace.Reject, rules: `add rule FAM t forward reject with tcp reset`},
		{name: "reject with icmpx", want: trace.Reject, rules: `add rule FAM t forward reject with icmpx admin-prohibited`},
		{name: "counter log comment", want: trace.Drop, traced: `counter name "c1"`, rules: `
add rule FAM t forward counter name "c1" log prefix "kp: " level info flags all counter packets 0 bytes 0 drop comment "bye"`},
		{name: "affinity empty", dnat: []string{"10.0.0.5:80", "10.0.0.6:80"}, rules: `
add set FAM t aff { type ipv4_addr ; flags timeout ; }
add chain FAM t svc
add chain FAM t ep1
add chain FAM t ep2
add rule FAM t ep1 update @aff { ip saddr }
add rule FAM t ep1 dnat to 10.0.0.5:80
add rule FAM t ep2 dnat to 10.0.0.6:80
add rule FAM t svc ip saddr @aff goto ep2
add rule FAM t svc numgen random mod 2 vmap { 0 : goto ep1 , 1 : goto ep2 }
add rule FAM t prerouting goto svc`},
		{name: "affinity pre-populated", dnat: []string{"10.0.0.6:80"}, rules: `
add set FAM t aff { type ipv4_addr ; flags timeout ; }
add element FAM t aff { 10.0.0.1 }
add chain FAM t svc
add chain FAM t ep1
add chain FAM t ep2
add rule FAM t ep1 update @aff { ip saddr }
add rule FAM t ep1 dnat to 10.0.0.5:80
add rule FAM t ep2 dnat to 10.0.0.6:80
add rule FAM t svc ip saddr @aff goto ep2
add rule FAM t svc numgen random mod 2 vmap { 0 : goto ep1 , 1 : goto ep2 }
add rule FAM t prerouting goto svc`},
		{name: "dnat to local goes to input", dnat: []string{"192.168.0.1:8080"}, rules: `
add rule FAM t prerouting dnat to 192.168.0.1:8080
add rule FAM t forward drop`},
		{name: "dnat to remote goes to forward", dnat: []string{"10.0.0.5:8080"}, want: trace.Drop, rules: `
add rule FAM t prerouting dnat to 10.0.0.5:8080
add rule FAM t input drop
add rule FAM t forward ip daddr 10.0.0.5 tcp dport 8080 drop`},
		{name: "only first nat binding per hook", dnat: []string{"10.0.0.5:80"}, rules: `
add chain FAM t late-nat { type nat hook prerouting priority 0 ; }
add rule FAM t prerouting dnat to 10.0.0.5:80
add rule FAM t late-nat dnat to 10.0.0.6:80`},
		{name: "hairpin", dnat: []string{"10.0.0.1:80"}, masq: true, rules: `
add set FAM t hairpin { type ipv4_addr . ipv4_addr . inet_proto . inet_service ; }
add element FAM t hairpin { 10.0.0.1 . 10.0.0.1 . tcp . 80 }
add rule FAM t prerouting dnat to 10.0.0.1:80
add rule FAM t postrouting ct status dnat ip saddr . ip daddr . meta l4proto . th dport @hairpin masquerade fully-random`},
		{name: "firewall allow interval concat", want: trace.Drop, pkt: trace.Packet{SourceIP: "11.0.0.1"}, rules: `
add set FAM t allow { type ipv4_addr . inet_proto . inet_service . ipv4_addr ; flags interval ; }
add element FAM t allow { 172.30.0.1 . tcp . 80 . 10.0.0.0/8 }
add chain FAM t fw
add rule FAM t fw ip daddr . meta l4proto . th dport . ip saddr @allow return
add rule FAM t fw drop
add rule FAM t filter-prerouting ct state new jump fw`},
		{name: "firewall allow interval concat allowed", rules: `
add set FAM t allow { type ipv4_addr . inet_proto . inet_service . ipv4_addr ; flags interval ; }
add element FAM t allow { 172.30.0.1 . tcp . 80 . 10.0.0.0/8 }
add chain FAM t fw
add rule FAM t fw ip daddr . meta l4proto . th dport . ip saddr @allow return
add rule FAM t fw drop
add rule FAM t filter-prerouting ct state new jump fw`},
		{name: "nodeport via fib local", pkt: trace.Packet{DestIP: "192.168.0.1", DestPort: 30080}, dnat: []string{"10.0.0.5:80"}, rules: `
add chain FAM t svc
add rule FAM t svc dnat to 10.0.0.5:80
add map FAM t nodeports { type inet_proto . inet_service : verdict ; }
add element FAM t nodeports { tcp . 30080 : goto svc }
add rule FAM t prerouting fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @nodeports`},
		{name: "locally generated output dnat and masquerade", pkt: trace.Packet{SourceIP: "192.168.0.1", LocallyGenerated: true},
			dnat: []string{"10.0.0.5:80"}, masq: true, rules: `
add rule FAM t output dnat to 10.0.0.5:80
add rule FAM t prerouting drop
add rule FAM t postrouting oifname != "lo" masquerade`},
		{name: "locally generated to local re-enters via lo without nat", pkt: trace.Packet{SourceIP: "192.168.0.1", DestIP: "192.168.0.1", LocallyGenerated: true},
			want: trace.Drop, rules: `
add rule FAM t prerouting dnat to 10.0.0.5:80
add rule FAM t input iifname "lo" drop`},
		{name: "locally generated skips prerouting for remote", pkt: trace.Packet{SourceIP: "192.168.0.1", LocallyGenerated: true}, rules: `
add rule FAM t filter-prerouting drop
add rule FAM t forward drop`},
		{name: "locally generated dnat to local", pkt: trace.Packet{SourceIP: "192.168.0.1", LocallyGenerated: true},
			dnat: []string{"127.0.0.1:8080"}, want: trace.Reject, rules: `
add rule FAM t output dnat to 127.0.0.1:8080
add rule FAM t input ip daddr 127.0.0.1 tcp dport 8080 reject`},
	})
}
