package nfttext

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/nft"
)

// TestCommandReadsPrintedOp: every kind of operation, printed as knftables writes
// it (nft.Op.AppendText), reads back as the same operation.
func TestCommandReadsPrintedOp(t *testing.T) {
	rule := &nft.Rule{Stmts: []nft.Stmt{nft.Match{Keys: []nft.Key{nft.Daddr(nft.IPv6)}, Value: nft.Addr(netip.IPv6Loopback())}, nft.Verdict{Kind: nft.Drop}}, Comment: "c"}
	a := netip.MustParseAddr("fd00::1")
	key := nft.ElemBuf(nil).Addr(a).Proto(nft.TCP).Num(80).Elem()
	v6 := &nft.SetType{Key: []nft.DataType{nft.TypeIPv6Addr}}
	tcpDport := nft.Key{Kind: nft.KeyTCPDport}
	for _, op := range []nft.Op{
		{Kind: nft.AddTable, Comment: "rules for kube-proxy"},
		{Kind: nft.AddTable, Create: true},
		{Kind: nft.DeleteTable},
		{Kind: nft.FlushTable},
		{Kind: nft.AddChain, Name: "services"},
		{Kind: nft.AddChain, Name: "reject-chain", Comment: "helper"},
		{Kind: nft.AddChain, Name: "in", Hook: &nft.Hook{Type: "filter", Hook: "input", Priority: "0", Policy: "accept"}, Comment: "x"},
		{Kind: nft.FlushChain, Name: "x"},
		{Kind: nft.DeleteChain, Name: "x"},
		{Kind: nft.AddSet, Name: "cluster-ips", Type: v6, Comment: "Active ClusterIPs"},
		{Kind: nft.AddSet, Name: "affinity-x", Type: v6, Timeout: 3 * time.Hour},
		{Kind: nft.AddSet, Name: "s", Type: &nft.SetType{Key: []nft.DataType{nft.TypeInetService}}, Flags: nft.SetInterval | nft.SetConstant, GCInterval: time.Minute, Size: 100, Policy: "memory", AutoMerge: true},
		{Kind: nft.AddSet, Name: "m", IsMap: true, Type: &nft.SetType{KeyOf: []nft.Key{nft.Daddr(nft.IPv6), tcpDport, nft.Numgen(1)}, DataOf: []nft.Key{nft.Daddr(nft.IPv6), tcpDport}}},
		{Kind: nft.AddSet, Name: "m", IsMap: true, Type: &nft.SetType{Key: []nft.DataType{nft.TypeIPv6Addr, nft.TypeInetProto, nft.TypeInetService}, Data: []nft.DataType{nft.TypeVerdict}}},
		{Kind: nft.FlushSet, Name: "s"},
		{Kind: nft.DeleteSet, Name: "m", IsMap: true},
		{Kind: nft.AddRule, Name: "c", Rule: rule},
		{Kind: nft.AddElement, Name: "s", Key: nft.ElemBuf(nil).Addr(a).Elem()},
		{Kind: nft.AddElement, Name: "m", Key: key, Value: nft.VerdictElem(nft.Verdict{Kind: nft.Goto, Chain: "x"}), Comment: "ns/svc:p", Create: true},
		{Kind: nft.AddElement, Name: "m", Key: nft.ElemBuf(nil).Addr(a).Num(80).Num(70000).Elem(), Value: nft.ElemBuf(nil).Addr(a).Num(8080).Elem()},
		{Kind: nft.AddElement, Name: "i", Key: nft.ElemBuf(nil).Ifname("eth0").Proto(nft.UDP).Elem()},
		{Kind: nft.DeleteElement, Name: "m", Key: key},
		{Kind: nft.AddCounter, Name: "n"},
		{Kind: nft.AddCounter, Name: "n", Packets: 5, Bytes: 300},
		{Kind: nft.DeleteCounter, Name: "n"},
	} {
		text := strings.TrimSuffix(string(op.AppendText(nil, nft.IPv6, "kube-proxy")), "\n")
		var p CommandParser
		cmd, err := p.Parse(text)
		if err != nil {
			t.Errorf("%s: %v", text, err)
			continue
		}
		got := cmd.Op
		if got.Rule != nil && op.Rule != nil && got.Rule.Equal(op.Rule) {
			got.Rule = op.Rule
		}
		if cmd.Family != nft.IPv6 || cmd.Table != "kube-proxy" || !reflect.DeepEqual(got, op) {
			t.Errorf("%s: read as %+v", text, cmd)
		}
	}
}

func TestCommandErrors(t *testing.T) {
	for _, line := range []string{
		"insert rule ip t c drop",
		"add table inet t",
		"add flowtable ip t f",
		"add rule ip t c index 0 drop",
		"delete rule ip t c handle 3",
		"add chain ip t c { policy drop ; }",
		"add set ip t s { type ipv4_addr ; flags bogus ; }",
		"add set ip t s { type ipv4_addr ; timeout 10s ; }",
		"add counter ip t k { packets x bytes 1 ; }",
		"flush counter ip t k",
		"flush element ip t s { 10.0.0.1 }",
		"delete element ip t m { 10.0.0.1 : drop }",
		"add element ip t s { 10.0.0.1",
		"add chain ip t handle 4",
		"add rule ip t c ip protocol tcp drop",
	} {
		var p CommandParser
		if cmd, err := p.Parse(line); err == nil {
			t.Errorf("%q: accepted as %+v", line, cmd)
		}
	}
}

// TestLower: the syntax the netlink writer accepts reads as the typed rule that
// prints it (in the printer's spelling).
func TestLower(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`ct state established,related accept`, `ct state established,related accept`},
		{`ip saddr != 10.0.0.1-10.0.0.5 drop`, `ip saddr != 10.0.0.1-10.0.0.5 drop`},
		{`ip saddr { 10.0.0.0/8, 10.1.0.1-10.1.0.9, 10.2.0.1 } drop`, `ip saddr { 10.0.0.0/8, 10.1.0.1-10.1.0.9, 10.2.0.1 } drop`},
		{`iifname "veth*" accept`, `iifname veth* accept`},
		{`meta iifname lo oifname != eth0 th sport 53 accept`, `iifname lo oifname != eth0 th sport 53 accept`},
		{`meta mark set meta mark | 0x4000`, `mark set mark or 0x4000`},
		{`mark set 16 mark 0x4000 mark and 0x4000 != 0 continue`, `mark set 0x10 mark 16384 mark and 0x4000 != 0 continue`},
		{`fib daddr type != local drop`, `fib daddr type != local drop`},
		{`numgen random mod 4 offset 1 2 jump c2`, `numgen random mod 4 offset 1 2 jump c2`},
		{`meta l4proto . th dport vmap { tcp . 80 : goto c2 , udp . 53 : drop }`, `meta l4proto . th dport vmap { tcp . 80 : goto c2 , udp . 53 : drop }`},
		{`add @aff { ip saddr } update @aff { ip saddr }`, `add @aff { ip saddr } update @aff { ip saddr }`},
		{`meta l4proto udp dnat ip to 10.0.0.1:53`, `meta l4proto udp dnat to 10.0.0.1:53`},
		{`dnat to 10.0.0.1`, `dnat to 10.0.0.1`},
		{`snat to 10.0.0.9:80`, `snat to 10.0.0.9:80`},
		{`masquerade random,persistent`, `masquerade random persistent`},
		{`dnat ip addr . port to numgen random mod 2 map { 0 : 10.0.0.1 . 80 , 1 : 10.0.0.2 . 80 }`,
			`dnat ip addr . port to numgen random mod 2 map { 0 : 10.0.0.1 . 80 , 1 : 10.0.0.2 . 80 }`},
		{`dnat ip addr . port to ip daddr . tcp dport map @m`, `dnat ip addr . port to ip daddr . tcp dport map @m`},
		{`counter name "k1" reject comment "a \"b\""`, `counter name "k1" reject comment "a \"b\""`},
	} {
		r, err := ParseRule(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		got, err := Lower(r, nft.IPv4)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if got.String() != tc.want {
			t.Errorf("%s: lowered to %s, want %s", tc.in, got.String(), tc.want)
		}
	}
	for _, in := range []string{
		`ip protocol tcp drop`, `log drop`, `counter packets 0 bytes 0 drop`, `reject with tcp reset`,
		`ct state bogus drop`, `ct state { new } drop`, `dnat to 10.0.0.1:99999`, `dnat ip6 to 10.0.0.1`,
		`ip saddr . th dport { 10.0.0.1 . 80 } drop`, `ip saddr 10.0.0.1, 10.0.0.2 drop`, `mark set mark`,
		`fib daddr . iif type local drop`, `snat ip addr . port to ip daddr map @m`, `dnat to 10.0.0.1:80 random`,
		`update @s { ip saddr timeout 5s }`, `tcp dport vmap { 80 : reject }`, `mark or 1 2 drop`,
	} {
		r, err := ParseRule(in)
		if err != nil {
			continue
		}
		if got, err := Lower(r, nft.IPv4); err == nil {
			t.Errorf("%s: lowered to %s", in, got.String())
		}
	}
}
