package nft

import (
	"net/netip"
	"testing"
	"time"
)

func TestOpText(t *testing.T) {
	a := netip.MustParseAddr("fd00::1")
	key := ElemBuf(nil).Addr(a).Proto(TCP).Num(80).Elem()
	gotoX := VerdictElem(Verdict{Kind: Goto, Chain: "x"})
	v6 := &SetType{Key: []DataType{TypeIPv6Addr}}
	epMap := &SetType{KeyOf: []Key{Daddr(IPv6), {Kind: KeyTCPDport}, Numgen(1)}, DataOf: []Key{Daddr(IPv6), {Kind: KeyTCPDport}}}
	rule := &Rule{Stmts: []Stmt{Match{Keys: []Key{Daddr(IPv6)}, Value: Addr(netip.IPv6Loopback())}, Verdict{Kind: Drop}}, Comment: "c"}
	for _, tc := range []struct {
		op   Op
		want string
	}{
		{Op{Kind: AddTable, Comment: "rules for kube-proxy"}, `add table ip6 kube-proxy { comment "rules for kube-proxy" ; }`},
		{Op{Kind: AddTable}, "add table ip6 kube-proxy"},
		{Op{Kind: DeleteTable}, "delete table ip6 kube-proxy"},
		{Op{Kind: AddChain, Name: "services"}, "add chain ip6 kube-proxy services"},
		{Op{Kind: AddChain, Name: "reject-chain", Comment: "helper"}, `add chain ip6 kube-proxy reject-chain { comment "helper" ; }`},
		{Op{Kind: AddChain, Name: "nat-output", Hook: &Hook{Type: "nat", Hook: "output", Priority: "-100"}},
			"add chain ip6 kube-proxy nat-output { type nat hook output priority -100 ; }"},
		{Op{Kind: FlushChain, Name: "x"}, "flush chain ip6 kube-proxy x"},
		{Op{Kind: DeleteChain, Name: "x"}, "delete chain ip6 kube-proxy x"},
		{Op{Kind: AddSet, Name: "cluster-ips", Type: v6, Comment: "Active ClusterIPs"},
			`add set ip6 kube-proxy cluster-ips { type ipv6_addr ; comment "Active ClusterIPs" ; }`},
		{Op{Kind: AddSet, Name: "affinity-x", Type: v6, Timeout: 3 * time.Hour},
			"add set ip6 kube-proxy affinity-x { type ipv6_addr ; flags dynamic,timeout ; timeout 10800s ; }"},
		{Op{Kind: AddSet, Name: "m", IsMap: true, Type: epMap},
			"add map ip6 kube-proxy m { typeof ip6 daddr . tcp dport . numgen random mod 1 : ip6 daddr . tcp dport ; }"},
		{Op{Kind: FlushSet, Name: "s"}, "flush set ip6 kube-proxy s"},
		{Op{Kind: DeleteSet, Name: "m", IsMap: true}, "delete map ip6 kube-proxy m"},
		{Op{Kind: AddRule, Name: "c", Rule: rule}, `add rule ip6 kube-proxy c ip6 daddr ::1 drop comment "c"`},
		{Op{Kind: AddElement, Name: "s", Key: ElemBuf(nil).Addr(a).Elem()}, "add element ip6 kube-proxy s { fd00::1 }"},
		{Op{Kind: AddElement, Name: "m", IsMap: true, Key: key, Value: gotoX, Comment: "ns/svc:p"},
			`add element ip6 kube-proxy m { fd00::1 . tcp . 80 comment "ns/svc:p" : goto x }`},
		{Op{Kind: DeleteElement, Name: "m", IsMap: true, Key: key, Value: gotoX, Comment: "ns/svc:p"},
			"delete element ip6 kube-proxy m { fd00::1 . tcp . 80 }"},
		{Op{Kind: AddCounter, Name: "n"}, "add counter ip6 kube-proxy n"},
		{Op{Kind: DeleteCounter, Name: "n"}, "delete counter ip6 kube-proxy n"},
		{Op{Kind: FlushTable}, "flush table ip6 kube-proxy"},
		{Op{Kind: AddCounter, Name: "n", Create: true, Packets: 5, Bytes: 300}, "create counter ip6 kube-proxy n { packets 5 bytes 300 ; }"},
		{Op{Kind: AddChain, Name: "in", Hook: &Hook{Type: "filter", Hook: "input", Priority: "0", Policy: "accept"}},
			"add chain ip6 kube-proxy in { type filter hook input priority 0 ; policy accept ; }"},
		{Op{Kind: AddSet, Name: "s", Type: &SetType{Key: []DataType{TypeInetService}}, Flags: SetInterval | SetConstant, GCInterval: time.Minute, Size: 100, Policy: "memory", AutoMerge: true, Comment: "c"},
			`add set ip6 kube-proxy s { type inet_service ; flags constant,interval ; gc-interval 60s ; size 100 ; policy memory ; auto-merge ; comment "c" ; }`},
	} {
		if got := string(tc.op.AppendText(nil, IPv6, "kube-proxy")); got != tc.want+"\n" {
			t.Errorf("got  %q\nwant %q", got, tc.want+"\n")
		}
	}
}

func TestElemText(t *testing.T) {
	for _, tc := range []struct {
		e    Elem
		want string
	}{
		{ElemBuf(nil).Addr(netip.MustParseAddr("10.96.0.12")).Proto(TCP).Num(80).Elem(), "10.96.0.12 . tcp . 80"},
		{ElemBuf(nil).Addr(netip.MustParseAddr("10.244.1.5")).Num(8080).Elem(), "10.244.1.5 . 8080"},
		{ElemBuf(nil).Proto(Proto(47)).Num(70000).Ifname("eth0").Elem(), "47 . 70000 . eth0"},
		{VerdictElem(Verdict{Kind: Goto, Chain: "service-x"}), "goto service-x"},
		{VerdictElem(Verdict{Kind: Drop}), "drop"},
		{Elem{}, ""},
	} {
		if got := tc.e.String(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	a, b := ElemBuf(nil).Addr(netip.MustParseAddr("10.0.0.12")).Elem(), ElemBuf(nil).Addr(netip.MustParseAddr("10.0.0.2")).Elem()
	if CompareText(a, b) >= 0 || CompareText(b, a) <= 0 || CompareText(a, a) != 0 {
		t.Errorf("CompareText does not order by text")
	}
}
