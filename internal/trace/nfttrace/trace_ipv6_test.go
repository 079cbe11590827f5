package nfttrace

import (
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/trace"
)

var defaultPacket6 = trace.Packet{SourceIP: "fd00:10::1", DestIP: "fd00:172:30::1", DestPort: 80, InputInterface: "eth0"}

func TestTraceIPv6(t *testing.T) {
	runTraceCases(t, knftables.IPv6Family, []string{"fd00:192::1"}, defaultPacket6, []traceCase{
		{name: "empty ruleset accepts"},
		{name: "daddr equal", rules: `add rule FAM t forward ip6 daddr fd00:172:30::1 drop`, want: trace.Drop},
		{name: "daddr != prefix", rules: `add rule FAM t forward ip6 daddr != fd00:172:30::/64 drop`},
		{name: "saddr anonymous set", rules: `add rule FAM t forward ip6 saddr { fd00:10::5, fd00:10::1 } reject`, want: trace.Reject},
		{name: "saddr != prefix set", rules: `add rule FAM t forward ip6 saddr != { fd00:10::/64 } drop`},
		{name: "ip selector never matches ipv6", rules: `add rule FAM t forward ip saddr != 10.0.0.0/8 drop`},
		{name: "named set", want: trace.Drop, rules: `
add set FAM t blocked { type ipv6_addr ; flags interval ; }
add element FAM t blocked { fd00:10::/112 }
add rule FAM t forward ip6 saddr @blocked drop`},
		{name: "nexthdr", rules: `add rule FAM t forward ip6 nexthdr udp drop`, pkt: trace.Packet{Protocol: "udp"}, want: trace.Drop},
		{name: "icmpv6 l4proto", rules: `add rule FAM t forward meta l4proto icmpv6 drop`, pkt: trace.Packet{Protocol: "icmpv6"}, want: trace.Drop},
		{name: "dnat bracketed", dnat: []string{"[fd00:10:180::1]:8080"}, rules: `
add rule FAM t prerouting meta l4proto tcp dnat to [fd00:10:180::1]:8080`},
		{name: "dnat ip6 to bracketed", dnat: []string{"[fd00:10:180::1]:8080"}, rules: `
add rule FAM t prerouting dnat ip6 to [fd00:10:180::1]:8080`},
		{name: "dnat without port", dnat: []string{"fd00:10:180::1"}, rules: `add rule FAM t prerouting dnat to fd00:10:180::1`},
		{name: "dnat addr . port numgen", dnat: []string{"[fd00:10:180::4]:80", "[fd00:10:180::5]:80"}, rules: `
add rule FAM t prerouting meta l4proto tcp dnat ip6 addr . port to numgen random mod 2 map { 0 : fd00:10:180::4 . 80 , 1 : fd00:10:180::5 . 80 }`},
		{name: "verdict map dispatch and masquerade", dnat: []string{"[fd00:10:180::1]:80"}, masq: true, rules: `
add chain FAM t svc
add rule FAM t svc ip6 daddr fd00:172:30::1 tcp dport 80 ip6 saddr != fd00:10:180::/64 mark set mark or 0x4000
add rule FAM t svc dnat to [fd00:10:180::1]:80
add map FAM t service-ips { type ipv6_addr . inet_proto . inet_service : verdict ; }
add element FAM t service-ips { fd00:172:30::1 . tcp . 80 : goto svc }
add rule FAM t prerouting ip6 daddr . meta l4proto . th dport vmap @service-ips
add rule FAM t postrouting mark and 0x4000 != 0 mark set mark xor 0x4000 masquerade fully-random`},
		{name: "fib daddr local to input", pkt: trace.Packet{DestIP: "fd00:192::1"}, want: trace.Drop, rules: `
add rule FAM t input fib daddr type local drop`},
		{name: "loopback is local", pkt: trace.Packet{SourceIP: "::1", DestIP: "::1", LocallyGenerated: true}, want: trace.Drop, rules: `
add rule FAM t filter-output fib daddr type local fib saddr type local drop`},
		{name: "hairpin", dnat: []string{"[fd00:10::1]:80"}, masq: true, rules: `
add set FAM t hairpin { type ipv6_addr . ipv6_addr . inet_proto . inet_service ; }
add element FAM t hairpin { fd00:10::1 . fd00:10::1 . tcp . 80 }
add rule FAM t prerouting dnat to [fd00:10::1]:80
add rule FAM t postrouting ct status dnat ip6 saddr . ip6 daddr . meta l4proto . th dport @hairpin masquerade fully-random`},
		{name: "affinity pre-populated", dnat: []string{"[fd00:10:180::2]:80"}, rules: `
add set FAM t aff { type ipv6_addr ; flags timeout ; }
add element FAM t aff { fd00:10::1 }
add chain FAM t ep1
add chain FAM t ep2
add rule FAM t ep1 update @aff { ip6 saddr }
add rule FAM t ep1 dnat to [fd00:10:180::1]:80
add rule FAM t ep2 dnat to [fd00:10:180::2]:80
add rule FAM t prerouting ip6 saddr @aff goto ep2
add rule FAM t prerouting numgen random mod 2 vmap { 0 : goto ep1 , 1 : goto ep2 }`},
	})
}

// TestInetTable checks that an inet table sees both families and that family-specific
// selectors only match their own family.
func TestInetTable(t *testing.T) {
	nft := newFake(t, knftables.InetFamily, `
add table FAM t
add chain FAM t fwd { type filter hook forward priority 0 ; }
add chain FAM t nat { type nat hook prerouting priority -100 ; }
add rule FAM t nat ip daddr 172.30.0.1 dnat ip to 10.0.0.5:80
add rule FAM t nat ip6 daddr fd00:172:30::1 dnat ip6 to [fd00::5]:80
add rule FAM t fwd meta nfproto ipv6 udp dport 53 reject
`)
	for _, tc := range []struct {
		pkt  trace.Packet
		want string
	}{
		{trace.Packet{SourceIP: "10.1.0.1", DestIP: "172.30.0.1", DestPort: 80}, "10.0.0.5:80"},
		{trace.Packet{SourceIP: "fd00:1::1", DestIP: "fd00:172:30::1", DestPort: 80}, "[fd00::5]:80"},
		{trace.Packet{SourceIP: "fd00:1::1", DestIP: "fd00:172:30::9", Protocol: "udp", DestPort: 53}, "REJECT"},
		{trace.Packet{SourceIP: "10.1.0.1", DestIP: "172.30.0.9", Protocol: "udp", DestPort: 53}, "ACCEPT"},
	} {
		res := mustTrace(t, nft, nil, tc.pkt)
		if got := res.Output(); got != tc.want {
			t.Errorf("%+v: got %q, want %q\n%s", tc.pkt, got, tc.want, res.TraceString())
		}
	}
}
