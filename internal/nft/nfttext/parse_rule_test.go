package nfttext

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	daddr := Selector{Name: "ip daddr", Type: "ipv4_addr"}
	l4 := Selector{Name: "meta l4proto", Type: "inet_proto"}
	dport := Selector{Name: "th dport", Type: "inet_service"}
	for _, tc := range []struct {
		in   string
		want Rule
	}{
		{`ip daddr . meta l4proto . th dport vmap @service-ips comment "x y"`,
			Rule{Stmts: []Stmt{VMap{MapRef{Key: Expr{daddr, l4, dport}, Name: "service-ips"}}}, Comment: "x y"}},
		{`ct state established,related accept`,
			Rule{Stmts: []Stmt{Match{Left: Expr{{Name: "ct state", Type: "ct_state"}}, Elems: [][]string{{"established"}, {"related"}}}, Verdict{Kind: "accept"}}}},
		{`ip saddr != { 10.0.0.0/8, 10.1.0.1-10.1.0.9 } drop`,
			Rule{Stmts: []Stmt{Match{Left: Expr{{Name: "ip saddr", Type: "ipv4_addr"}}, Neq: true, Braced: true, Elems: [][]string{{"10.0.0.0/8"}, {"10.1.0.1-10.1.0.9"}}}, Verdict{Kind: "drop"}}}},
		{`mark and 0x4000 != 0 meta mark set meta mark | 0x10 mark set 7`,
			Rule{Stmts: []Stmt{
				Match{Left: Expr{{Name: "meta mark", Type: "mark", Ops: []BitOp{{'&', 0x4000}}}}, Neq: true, Elems: [][]string{{"0"}}},
				MarkSet{From: &Selector{Name: "meta mark", Type: "mark", Ops: []BitOp{{'|', 0x10}}}},
				MarkSet{Value: 7},
			}}},
		{`numgen random mod 2 offset 1 vmap { 1 : goto a , 2 : drop }`,
			Rule{Stmts: []Stmt{VMap{MapRef{Key: Expr{{Name: "numgen random", Type: "integer", Mod: 2, Offset: 1}}, Elems: []MapElem{
				{Key: []string{"1"}, Verdict: &Verdict{Kind: "goto", Chain: "a"}, Text: "1 : goto a"},
				{Key: []string{"2"}, Verdict: &Verdict{Kind: "drop"}, Text: "2 : drop"},
			}}}}}},
		{`meta l4proto tcp dnat ip addr . port to ip daddr . tcp dport map @m`,
			Rule{Stmts: []Stmt{
				Match{Left: Expr{l4}, Elems: [][]string{{"tcp"}}},
				NAT{Kind: "dnat", Family: "ip", AddrPort: true, Map: &MapRef{Key: Expr{daddr, {Name: "tcp dport", Type: "inet_service"}}, Name: "m"}},
			}}},
		{`dnat to [fd00::1]:80 persistent,random`, Rule{Stmts: []Stmt{NAT{Kind: "dnat", To: []string{"[fd00::1]:80"}, Flags: []string{"persistent", "random"}}}}},
		{`update @aff { ip saddr } masquerade fully-random`,
			Rule{Stmts: []Stmt{Dynset{Op: "update", Set: "aff", Key: Expr{{Name: "ip saddr", Type: "ipv4_addr"}}}, Masquerade{Flags: []string{"fully-random"}}}}},
		{`fib daddr . iif type local counter name "c" reject with icmp type port-unreachable`,
			Rule{Stmts: []Stmt{
				Match{Left: Expr{{Name: "fib daddr type", Type: "fib_addrtype", Iface: "iif"}}, Elems: [][]string{{"local"}}},
				Counter{Name: "c"},
				Reject{With: []string{"icmp", "type", "port-unreachable"}},
			}}},
		{`iifname "veth*" log prefix "p" flags all counter packets 1 bytes 2 continue`,
			Rule{Stmts: []Stmt{
				Match{Left: Expr{{Name: "meta iifname", Type: "ifname"}}, Elems: [][]string{{"veth*"}}},
				Log{Options: []string{"prefix", "p", "flags", "all"}},
				Counter{Values: true, Packets: 1, Bytes: 2},
				Verdict{Kind: "continue"},
			}}},
	} {
		got, err := ParseRule(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(*got, tc.want) {
			t.Errorf("%s:\n got %#v\nwant %#v", tc.in, *got, tc.want)
		}
	}
}

func TestParseRuleErrors(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{`limit rate 10/second drop`, `unsupported statement at "limit"`},
		{`ip ttl 5 drop`, `unsupported ip field at "ttl"`},
		{`meta skuid 0 drop`, `unsupported meta key at "skuid"`},
		{`ip saddr`, `expected ipv4_addr value at end of rule`},
		{`drop comment "x" accept`, `comment must end the rule`},
		{`numgen inc mod 2 vmap { 0 : drop }`, `only "numgen random" is supported`},
		{`tcp dport vmap { 80 : queue }`, `bad verdict "queue"`},
		{`ip daddr @s vmap`, `unsupported statement at "vmap"`},
		{`update @s ip saddr`, `expected "{"`},
		{``, `empty rule`},
		{`iifname "eth0 drop`, `unterminated string`},
	} {
		_, err := ParseRule(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: got %v, want an error containing %q", tc.in, err, tc.err)
		}
	}
}

func TestParseNATTarget(t *testing.T) {
	for _, tc := range []struct {
		words  []string
		family string
		want   string
		err    bool
	}{
		{[]string{"10.0.0.1:80"}, "ip", "10.0.0.1:80", false},
		{[]string{"10.0.0.1"}, "", "10.0.0.1", false},
		{[]string{"[fd00::1]:80"}, "ip6", "[fd00::1]:80", false},
		{[]string{"fd00::1"}, "ip6", "fd00::1", false},
		{[]string{"10.0.0.1", "53"}, "ip", "10.0.0.1:53", false},
		{[]string{"10.0.0.1:80"}, "ip6", "", true},
		{[]string{"10.0.0.1:http"}, "", "", true},
	} {
		got, err := ParseNATTarget(tc.words, tc.family)
		if (err != nil) != tc.err || (err == nil && got.String() != tc.want) {
			t.Errorf("%q %s: got %v, %v", tc.words, tc.family, got, err)
		}
	}
}
