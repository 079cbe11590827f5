package ipttrace

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/trace"
)

// testSets are the set types kube-proxy's ipvs mode creates, as ipset save
// lists them.
const testSets = `create IP hash:ip family inet hashsize 1024 maxelem 65536
add IP 172.30.0.1
create IPPORT hash:ip,port family inet hashsize 1024 maxelem 65536
add IPPORT 172.30.0.1,tcp:80
add IPPORT 172.30.0.1,udp:53
add IPPORT 172.30.0.1,sctp:7777
create IPPORTIP hash:ip,port,ip family inet hashsize 1024 maxelem 65536
add IPPORTIP 172.30.0.1,tcp:80,10.0.0.1
create IPPORTNET hash:ip,port,net family inet hashsize 1024 maxelem 65536
add IPPORTNET 172.30.0.1,tcp:80,10.0.0.0/8
add IPPORTNET 172.30.0.1,tcp:80,203.0.113.7
create NET hash:net family inet hashsize 1024 maxelem 65536
add NET 10.0.0.0/8
create PORTS bitmap:port range 0-65535
add PORTS 80
create V6 hash:ip family inet6 hashsize 1024 maxelem 65536
add V6 fd00::1
create EMPTY hash:ip,port family inet hashsize 1024 maxelem 65536
`

func TestTraceSets(t *testing.T) {
	set := func(name string, c traceCase) traceCase {
		c.name, c.sets = name, testSets
		if c.want == "" && c.traced == "" {
			c.want = trace.Drop
		}
		return c
	}
	runTraceCases(t, false, []string{"192.168.0.1"}, defaultPacket4, []traceCase{
		set("hash:ip dst", traceCase{rules: `filter -A FORWARD -m set --match-set IP dst -j DROP`}),
		set("hash:ip src", traceCase{rules: `filter -A FORWARD -m set --match-set IP src -j DROP`, want: trace.Accept}),
		set("! hash:ip", traceCase{rules: `filter -A FORWARD -m set ! --match-set IP src -j DROP`}),
		set("hash:ip,port", traceCase{rules: `filter -A FORWARD -m set --match-set IPPORT dst,dst -j DROP`,
			traced: "    set IPPORT holds the packet", want: trace.Drop}),
		set("hash:ip,port other port", traceCase{rules: `filter -A FORWARD -m set --match-set IPPORT dst,dst -j DROP`,
			pkt: trace.Packet{DestPort: 81}, want: trace.Accept}),
		set("hash:ip,port other protocol", traceCase{rules: `filter -A FORWARD -m set --match-set IPPORT dst,dst -j DROP`,
			pkt: trace.Packet{Protocol: "udp"}, want: trace.Accept}),
		set("hash:ip,port udp", traceCase{rules: `filter -A FORWARD -m set --match-set IPPORT dst,dst -j DROP`,
			pkt: trace.Packet{Protocol: "udp", DestPort: 53}}),
		set("hash:ip,port sctp", traceCase{rules: `filter -A FORWARD -m set --match-set IPPORT dst,dst -j DROP`,
			pkt: trace.Packet{Protocol: "sctp", DestPort: 7777}}),
		// ip_set_test: fewer flags than the set's dimensions never match.
		set("too few flags", traceCase{rules: `filter -A FORWARD -m set --match-set IPPORT dst -j DROP`, want: trace.Accept}),
		set("more flags than dimensions", traceCase{rules: `filter -A FORWARD -m set --match-set IPPORT dst,dst,src -j DROP`}),
		set("hash:ip,port,ip", traceCase{rules: `filter -A FORWARD -m set --match-set IPPORTIP dst,dst,src -j DROP`}),
		set("hash:ip,port,ip other source", traceCase{rules: `filter -A FORWARD -m set --match-set IPPORTIP dst,dst,src -j DROP`,
			pkt: trace.Packet{SourceIP: "10.0.0.2"}, want: trace.Accept}),
		set("hash:ip,port,net", traceCase{rules: `filter -A FORWARD -m set --match-set IPPORTNET dst,dst,src -j DROP`,
			pkt: trace.Packet{SourceIP: "10.9.9.9"}}),
		set("hash:ip,port,net host", traceCase{rules: `filter -A FORWARD -m set --match-set IPPORTNET dst,dst,src -j DROP`,
			pkt: trace.Packet{SourceIP: "203.0.113.7"}}),
		set("hash:ip,port,net outside", traceCase{rules: `filter -A FORWARD -m set --match-set IPPORTNET dst,dst,src -j DROP`,
			pkt: trace.Packet{SourceIP: "203.0.113.8"}, want: trace.Accept}),
		set("hash:net", traceCase{rules: `filter -A FORWARD -m set --match-set NET src -j DROP`}),
		set("bitmap:port tcp", traceCase{rules: `filter -A FORWARD -p tcp -m set --match-set PORTS dst -j DROP`}),
		set("bitmap:port udp", traceCase{rules: `filter -A FORWARD -m set --match-set PORTS dst -j DROP`, pkt: trace.Packet{Protocol: "udp"}}),
		// ip_set_get_ip_port: a bitmap:port sees only TCP and UDP ports.
		set("bitmap:port sctp", traceCase{rules: `filter -A FORWARD -m set --match-set PORTS dst -j DROP`,
			pkt: trace.Packet{Protocol: "sctp"}, want: trace.Accept}),
		set("set of the other family", traceCase{rules: `filter -A FORWARD -m set ! --match-set V6 dst -j DROP`}),
		set("empty set", traceCase{rules: `filter -A FORWARD -m set --match-set EMPTY dst,dst -j DROP`, want: trace.Accept}),
	})
}

func TestSetErrors(t *testing.T) {
	tr, err := New([]byte(buildSave(`filter -A FORWARD -m set --match-set MISSING dst -j DROP`)), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Trace(defaultPacket4); err == nil || !strings.Contains(err.Error(), "set MISSING was not given") {
		t.Errorf("missing set: %v", err)
	}
	for _, tc := range []struct{ save, want string }{
		{"create S hash:ip,mark family inet\n", `type "hash:ip,mark" is not modelled`},
		{"create S hash:net family inet\nadd S 10.0.0.0/8 nomatch\n", "nomatch is not modelled"},
		{"create S hash:ip,port family inet\nadd S 10.0.0.1,icmp:echo-request\n", `protocol "icmp" is not modelled`},
		{"create S hash:ip family inet\nadd S fd00::1\n", "not of the set's family"},
		{"create S hash:ip,port family inet\nadd S 10.0.0.1\n", "wants 2 comma-separated parts"},
	} {
		sets, err := ipset.ParseSaveSets([]byte(tc.save))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.WithSets(sets); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.save, err, tc.want)
		}
	}
}

// fakeIPVS takes packets to 172.30.0.1:80 (TCP) to its targets.
type fakeIPVS struct {
	targets   []Target
	untracked bool
}

func (f fakeIPVS) Balance(c Conn) (Balancing, error) {
	if c.Dst != netip.MustParseAddr("172.30.0.1") || c.DPort != 80 || c.Proto != 6 {
		return Balancing{}, nil
	}
	return Balancing{Taken: true, Notes: []string{"fake virtual server"}, Targets: f.targets, Untracked: f.untracked}, nil
}

func TestTraceIPVSStage(t *testing.T) {
	two := fakeIPVS{targets: []Target{
		{AddrPort: netip.MustParseAddrPort("10.180.0.1:8080"), Share: 0.25},
		{AddrPort: netip.MustParseAddrPort("10.180.0.2:8080"), Share: 0.75},
	}}
	local := fakeIPVS{targets: []Target{{AddrPort: netip.MustParseAddrPort("192.168.0.1:8080"), Share: 1}}}
	// 172.30.0.1 is local (kube-ipvs0), as IPVS needs for arriving packets.
	runTraceCases(t, false, []string{"192.168.0.1", "172.30.0.1"}, defaultPacket4, []traceCase{
		{name: "arriving: taken at LOCAL_IN after filter", ipvs: two, dnat: []string{"10.180.0.1:8080", "10.180.0.2:8080"}, paths: 2,
			traced: "ipvs INPUT (hook input, priority 99: ip_vs_in)"},
		{name: "filter INPUT runs first", ipvs: two, rules: `filter -A INPUT -d 172.30.0.1/32 -j DROP`, want: trace.Drop},
		// nat INPUT (priority 100) is after IPVS: a stolen packet skips it,
		// then goes out through LOCAL_OUT (filter OUTPUT) and POSTROUTING.
		{name: "stolen: nat INPUT skipped", ipvs: two, rules: "nat -A INPUT -j SNAT --to-source 1.1.1.1", dnat: []string{"10.180.0.1:8080", "10.180.0.2:8080"}},
		{name: "stolen: out through filter OUTPUT", ipvs: two, rules: `filter -A OUTPUT -d 10.180.0.2/32 -j DROP`,
			want: "ACCEPT,DROP", dnat: []string{"10.180.0.1:8080", "10.180.0.2:8080"}},
		{name: "stolen: no input interface in OUTPUT", ipvs: two, rules: `filter -A OUTPUT -i eth0 -j DROP`, dnat: []string{"10.180.0.1:8080", "10.180.0.2:8080"}},
		{name: "stolen: nat OUTPUT does not run again", ipvs: two, rules: "nat -A OUTPUT -j DNAT --to-destination 9.9.9.9", dnat: []string{"10.180.0.1:8080", "10.180.0.2:8080"}},
		{name: "stolen: masquerade in POSTROUTING", ipvs: two, rules: "mangle -A PREROUTING -j MARK --set-xmark 0x4000/0x4000\nnat -A POSTROUTING -m mark --mark 0x4000/0x4000 -j MASQUERADE",
			dnat: []string{"10.180.0.1:8080", "10.180.0.2:8080"}, masq: true},
		// Without IPVS's conntrack sysctl its packets leave conntrack: no
		// masquerade, and -m conntrack sees them untracked.
		{name: "stolen untracked: nat skipped", ipvs: fakeIPVS{targets: two.targets, untracked: true},
			rules: "mangle -A PREROUTING -j MARK --set-xmark 0x4000/0x4000\nnat -A POSTROUTING -j MASQUERADE\nfilter -A OUTPUT -m conntrack --ctstate UNTRACKED -j MARK --set-xmark 0x1/0x1",
			dnat:  []string{"10.180.0.1:8080", "10.180.0.2:8080"}, mark: ptrTo(uint32(0x4001))},
		{name: "a local real server: nat INPUT runs", ipvs: local, rules: "nat -A INPUT -j SNAT --to-source 1.1.1.1",
			dnat: []string{"192.168.0.1:8080"}, snat: "1.1.1.1"},
		{name: "a DNAT in PREROUTING comes first", ipvs: two, rules: "nat -A PREROUTING -j DNAT --to-destination 10.9.9.9:80", dnat: []string{"10.9.9.9:80"}},
		{name: "no real server", ipvs: fakeIPVS{}, want: trace.Reject, traced: "fake virtual server"},
		{name: "from loopback to a real server elsewhere", ipvs: two, pkt: trace.Packet{LocallyGenerated: true, SourceIP: "127.0.0.1"},
			want: trace.Drop, traced: "IPVS drops it: traffic from a loopback address"},
		{name: "from loopback to a local real server", ipvs: local, pkt: trace.Packet{LocallyGenerated: true, SourceIP: "127.0.0.1"},
			dnat: []string{"192.168.0.1:8080"}},
		{name: "arriving, DNATed to loopback", ipvs: fakeIPVS{targets: []Target{{AddrPort: netip.MustParseAddrPort("127.0.0.1:8080"), Share: 1}}},
			want: trace.Drop, traced: "DNATed to a loopback address"},
		{name: "other port: delivered locally", ipvs: two, pkt: trace.Packet{DestPort: 81}},
		{name: "locally generated: taken at LOCAL_OUT", ipvs: two, pkt: trace.Packet{LocallyGenerated: true, SourceIP: "192.168.0.1"},
			dnat: []string{"10.180.0.1:8080", "10.180.0.2:8080"}, traced: "ipvs OUTPUT (hook output, priority -98: ip_vs_in)"},
		{name: "locally generated: after nat OUTPUT", ipvs: two, pkt: trace.Packet{LocallyGenerated: true, SourceIP: "192.168.0.1"},
			rules: "nat -A OUTPUT -j MARK --set-xmark 0x1/0x1", mark: ptrTo(uint32(1)), dnat: []string{"10.180.0.1:8080", "10.180.0.2:8080"}},
		{name: "physdev is-in without bridges", rules: `filter -A INPUT -m physdev --physdev-is-in -j DROP`, pkt: trace.Packet{DestIP: "192.168.0.1"}},
		{name: "physdev is-in from a bridge", rules: `filter -A INPUT -m physdev --physdev-is-in -j DROP`, bridged: []string{"eth0"},
			pkt: trace.Packet{DestIP: "192.168.0.1"}, want: trace.Drop},
		{name: "-m ipvs --ipvs after IPVS", ipvs: two, rules: `filter -A OUTPUT -m ipvs --ipvs -j DROP`, want: trace.Drop,
			dnat: []string{"10.180.0.1:8080", "10.180.0.2:8080"}},
		{name: "-m ipvs --vaddr without IPVS", rules: `filter -A INPUT -m ipvs --vaddr 172.30.0.1 -j DROP`, pkt: trace.Packet{DestIP: "192.168.0.1"}},
	})
}

// TestTraceIPVSShares: the walk weights each real server by its share.
func TestTraceIPVSShares(t *testing.T) {
	tr, err := New([]byte(buildSave("")), false, addrs("172.30.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.WithBalancer(fakeIPVS{targets: []Target{
		{AddrPort: netip.MustParseAddrPort("10.180.0.1:80"), Share: 0.25},
		{AddrPort: netip.MustParseAddrPort("10.180.0.2:80"), Share: 0.75},
	}}).Trace(defaultPacket4)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Outcomes) != 2 || res.Outcomes[0].Probability != 0.25 || res.Outcomes[1].Probability != 0.75 {
		t.Errorf("outcomes %+v", res.Outcomes)
	}
	// The connection lookup of -m ipvs --vaddr is not modelled: an error.
	tr, err = New([]byte(buildSave(`filter -A OUTPUT -m ipvs --vproto 6 --vaddr 172.30.0.1 --vport 80 -j DROP`)), false, addrs("172.30.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.WithBalancer(fakeIPVS{targets: []Target{{AddrPort: netip.MustParseAddrPort("10.180.0.1:80"), Share: 1}}}).Trace(defaultPacket4); err == nil ||
		!strings.Contains(err.Error(), "not modelled") {
		t.Errorf("-m ipvs --vaddr: %v", err)
	}
}
