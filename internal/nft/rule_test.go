package nft

import (
	"net/netip"
	"testing"
)

func keys(k ...Key) []Key { return k }

func TestPrinter(t *testing.T) {
	tcpDport, _ := Dport(TCP)
	ap := netip.MustParseAddrPort
	for _, tc := range []struct {
		rule Rule
		want string
	}{
		{Rule{Stmts: []Stmt{Match{Keys: keys(CtStateKey), Value: CtStateNew}, Verdict{Kind: Jump, Chain: "firewall-check"}}},
			"ct state new jump firewall-check"},
		{Rule{Stmts: []Stmt{MaskedMatch{Key: Mark, Mask: 0x4000, Neq: true}, MarkSet{Op: BitXor, Value: 0x4000}, Masquerade{FullyRandom: true}}},
			"mark and 0x4000 != 0 mark set mark xor 0x4000 masquerade fully-random"},
		{Rule{Stmts: []Stmt{Match{Keys: keys(CtStatusKey), Value: CtStatusDNAT},
			Match{Keys: keys(Saddr(IPv4), Daddr(IPv4), L4Proto, THDport), Value: SetRef("hairpin-connections")}, Masquerade{FullyRandom: true}}},
			"ct status dnat ip saddr . ip daddr . meta l4proto . th dport @hairpin-connections masquerade fully-random"},
		{Rule{Stmts: []Stmt{Match{Keys: keys(Daddr(IPv4)), Value: SetRef("cluster-ips")}, Reject{}}, Comment: "Reject traffic"},
			`ip daddr @cluster-ips reject comment "Reject traffic"`},
		{Rule{Stmts: []Stmt{Match{Keys: keys(Daddr(IPv6)), Value: Set{Prefix(netip.MustParsePrefix("fd30::/108"))}}, Verdict{Kind: Drop}}},
			"ip6 daddr { fd30::/108 } drop"},
		{Rule{Stmts: []Stmt{Match{Keys: keys(Saddr(IPv4)), Neq: true, Value: Set{Prefix(netip.MustParsePrefix("203.0.113.0/25")), Addr(netip.MustParseAddr("1.2.3.4"))}}, Verdict{Kind: Drop}}},
			"ip saddr != { 203.0.113.0/25, 1.2.3.4 } drop"},
		{Rule{Stmts: []Stmt{Match{Keys: keys(FibDaddrType), Value: FibLocal}, Match{Keys: keys(Daddr(IPv6)), Neq: true, Value: Addr(netip.IPv6Loopback())},
			VMap{Keys: keys(L4Proto, THDport), Map: "service-nodeports"}}},
			"fib daddr type local ip6 daddr != ::1 meta l4proto . th dport vmap @service-nodeports"},
		{Rule{Stmts: []Stmt{Counter{Name: "localhost-nodeport-rejected-udp"}, Reject{}}},
			`counter name "localhost-nodeport-rejected-udp" reject`},
		{Rule{Stmts: []Stmt{Counter{}, Verdict{Kind: Accept}}}, "counter accept"},
		{Rule{Stmts: []Stmt{Match{Keys: keys(IIFName), Neq: true, Value: Ifname{Name: "veth", Wildcard: true}}, MarkSet{Op: BitOr, Value: 0x4000}}},
			"iifname != veth* mark set mark or 0x4000"},
		{Rule{Stmts: []Stmt{Update{Set: "affinity-x", Keys: keys(Saddr(IPv4))}}}, "update @affinity-x { ip saddr }"},
		{Rule{Stmts: []Stmt{Match{Keys: keys(L4Proto), Value: UDP}, DNAT{To: ap("[fd10::1]:53")}}}, "meta l4proto udp dnat to [fd10::1]:53"},
		{Rule{Stmts: []Stmt{Match{Keys: keys(Numgen(2)), Value: Num(0)}, Match{Keys: keys(L4Proto), Value: TCP}, DNAT{To: ap("10.0.0.1:80")}}},
			"numgen random mod 2 0 meta l4proto tcp dnat to 10.0.0.1:80"},
		{Rule{Stmts: []Stmt{VMap{Keys: keys(Numgen(2)), Elems: []VMapElem{{Key: 0, Verdict: Verdict{Goto, "endpoint-a"}}, {Key: 1, Verdict: Verdict{Goto, "endpoint-b"}}}}}},
			"numgen random mod 2 vmap { 0 : goto endpoint-a , 1 : goto endpoint-b }"},
		{Rule{Stmts: []Stmt{VMap{Keys: keys(L4Proto, THDport), Elems: []VMapElem{{Fields: []Value{TCP, Num(80)}, Verdict: Verdict{Kind: Drop}}}}}},
			"meta l4proto . th dport vmap { tcp . 80 : drop }"},
		{Rule{Stmts: []Stmt{Match{Keys: keys(Key{Kind: KeyOIFName}), Value: Ifname{Name: "eth0"}}, Match{Keys: keys(Key{Kind: KeyTHSport}), Value: Num(53)},
			Match{Keys: keys(Saddr(IPv4)), Neq: true, Value: Range{From: netip.MustParseAddr("10.0.0.1"), To: netip.MustParseAddr("10.0.0.5")}},
			Match{Keys: keys(Key{Kind: KeyNumgen, Mod: 4, Offset: 1}), Value: Num(2)}, MarkSet{Op: BitSet, Value: 0x10},
			Update{Set: "s", Keys: keys(Saddr(IPv4)), Add: true}, SNAT{To: ap("10.0.0.9:0"), NoPort: true}}},
			"oifname eth0 th sport 53 ip saddr != 10.0.0.1-10.0.0.5 numgen random mod 4 offset 1 2 mark set 0x10 add @s { ip saddr } snat to 10.0.0.9"},
		{Rule{Stmts: []Stmt{DNAT{To: ap("10.0.0.1:0"), NoPort: true}, Masquerade{Random: true, Persistent: true}}}, "dnat to 10.0.0.1 masquerade random persistent"},
		{Rule{Stmts: []Stmt{Match{Keys: keys(L4Proto), Value: SCTP}, DNATMap{Family: IPv6, Keys: keys(Numgen(2)),
			Elems: []DNATElem{{0, ap("[fd10::1]:80")}, {1, ap("[fd10::2]:80")}}}}},
			"meta l4proto sctp dnat ip6 addr . port to numgen random mod 2 map { 0 : fd10::1 . 80 , 1 : fd10::2 . 80 }"},
		{Rule{Stmts: []Stmt{DNATMap{Family: IPv4, Keys: keys(Daddr(IPv4), tcpDport, Numgen(3)), Map: "service-endpoints-tcp-0a"}}},
			"dnat ip addr . port to ip daddr . tcp dport . numgen random mod 3 map @service-endpoints-tcp-0a"},
		{Rule{Stmts: []Stmt{Match{Keys: keys(Saddr(IPv4)), Value: Prefix(netip.MustParsePrefix("10.0.0.0/8"))}, Verdict{Kind: Goto, Chain: "service-X-ns/svc/tcp/p"}}, Comment: `say "hi"`},
			`ip saddr 10.0.0.0/8 goto service-X-ns/svc/tcp/p comment "say \"hi\""`},
		{Rule{Stmts: []Stmt{Verdict{Kind: Return}}}, "return"},
	} {
		if got := tc.rule.String(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
		if !tc.rule.Equal(&tc.rule) {
			t.Errorf("%s: not equal to itself", tc.want)
		}
	}
}

func TestStatementsOmitComment(t *testing.T) {
	r := Rule{Stmts: []Stmt{Verdict{Kind: Drop}}, Comment: "c"}
	if got := r.Statements(); got != "drop" {
		t.Errorf("Statements() = %q", got)
	}
}

func TestEqual(t *testing.T) {
	base := func() Rule {
		return Rule{Stmts: []Stmt{
			Match{Keys: keys(Saddr(IPv4)), Neq: true, Value: Set{Prefix(netip.MustParsePrefix("10.0.0.0/8")), Addr(netip.MustParseAddr("1.2.3.4"))}},
			VMap{Keys: keys(Numgen(2)), Elems: []VMapElem{{Key: 0, Verdict: Verdict{Goto, "a"}}, {Key: 1, Verdict: Verdict{Goto, "b"}}}},
		}, Comment: "c"}
	}
	a := base()
	for i, mutate := range []func(*Rule){
		func(r *Rule) { r.Comment = "" },
		func(r *Rule) { r.Stmts = r.Stmts[:1] },
		func(r *Rule) { m := r.Stmts[0].(Match); m.Neq = false; r.Stmts[0] = m },
		func(r *Rule) {
			m := r.Stmts[0].(Match)
			m.Value = Set{Prefix(netip.MustParsePrefix("10.0.0.0/8"))}
			r.Stmts[0] = m
		},
		func(r *Rule) { m := r.Stmts[0].(Match); m.Value = SetRef("x"); r.Stmts[0] = m },
		func(r *Rule) { m := r.Stmts[0].(Match); m.Keys = keys(Daddr(IPv4)); r.Stmts[0] = m },
		func(r *Rule) { v := r.Stmts[1].(VMap); v.Elems = v.Elems[:1]; r.Stmts[1] = v },
		func(r *Rule) { r.Stmts[1] = Verdict{Kind: Drop} },
	} {
		b := base()
		if !a.Equal(&b) {
			t.Fatalf("case %d: equal rules differ", i)
		}
		mutate(&b)
		if a.Equal(&b) || b.Equal(&a) {
			t.Errorf("case %d: different rules are equal: %s / %s", i, a.String(), b.String())
		}
	}
}
