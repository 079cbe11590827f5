package ipttrace

import (
	"testing"

	"github.com/kproxy/kproxy/internal/trace"
)

var defaultPacket6 = trace.Packet{SourceIP: "fd10::5", DestIP: "fd30::1", DestPort: 80, InputInterface: "eth0"}

func TestTraceIPv6(t *testing.T) {
	runTraceCases(t, true, []string{"fd00::2"}, defaultPacket6, []traceCase{
		{name: "empty tables accept"},
		{name: "-d", rules: `filter -A FORWARD -d fd30::1/128 -j DROP`, want: trace.Drop},
		{name: "! -s prefix", rules: `filter -A FORWARD ! -s fd10::/64 -j DROP`},
		{name: "DNAT with port", rules: `nat -A PREROUTING -d fd30::1/128 -p tcp -m tcp --dport 80 -j DNAT --to-destination [fd10::1]:8080`,
			dnat: []string{"[fd10::1]:8080"}},
		{name: "DNAT without port", rules: `nat -A PREROUTING -j DNAT --to-destination fd10::1`, dnat: []string{"fd10::1"}},
		{name: "DNAT bracketed without port", rules: `nat -A PREROUTING -j DNAT --to-destination [fd10::1]`, dnat: []string{"fd10::1"}},
		{name: "addrtype LOCAL", rules: `filter -A INPUT -m addrtype --dst-type LOCAL -j DROP`, pkt: trace.Packet{DestIP: "fd00::2"}, want: trace.Drop},
		{name: "::1 is LOCAL", rules: `filter -A INPUT -m addrtype --dst-type LOCAL -j DROP`, pkt: trace.Packet{DestIP: "::1"}, want: trace.Drop},
		{name: "multicast", rules: `filter -A FORWARD -m addrtype --dst-type MULTICAST -j DROP`, pkt: trace.Packet{DestIP: "ff02::1"}, want: trace.Drop},
		{name: "ipv6-icmp", rules: `filter -A FORWARD -p ipv6-icmp -j DROP`, pkt: trace.Packet{Protocol: "icmpv6"}, want: trace.Drop},
		{name: "recent with an IPv6 mask", rules: "nat -A PREROUTING -m recent --rcheck --name X --mask ffff:ffff:ffff:ffff:: --rsource -j DNAT --to-destination fd10::1",
			recent: map[string][]string{"X": {"fd10::99"}}, dnat: []string{"fd10::1"}},
		{name: "SNAT", rules: `nat -A POSTROUTING -j SNAT --to-source [fd00::2]:5000`, snat: "[fd00::2]:5000"},
	})
}

func TestIPv6Refusals(t *testing.T) {
	for _, rules := range []string{
		`filter -A FORWARD -d 10.0.0.1/32 -j DROP`,
		`nat -A PREROUTING -j DNAT --to-destination 10.0.0.1:80`,
		`nat -A PREROUTING -m recent --rcheck --name X --mask 255.255.255.255 -j ACCEPT`,
	} {
		if _, err := New([]byte(buildSave(rules)), true, nil); err == nil {
			t.Errorf("New accepted IPv4 in IPv6 rules: %s", rules)
		}
	}
}
