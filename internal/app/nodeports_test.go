package app

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/config"
)

func parseAddrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, 0, len(ss))
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// Cases of upstream's Test_expandNodePortAddressKeywords, plus loopback-only nodes.
func TestExpandNodePortAddresses(t *testing.T) {
	v4, v6 := netip.MustParseAddr("192.168.1.1"), netip.MustParseAddr("fd00::1")
	loopback4, loopback6 := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")
	dualStack := map[v1.IPFamily]netip.Addr{v1.IPv4Protocol: v4, v1.IPv6Protocol: v6}
	ipv4Only := map[v1.IPFamily]netip.Addr{v1.IPv4Protocol: v4, v1.IPv6Protocol: loopback6}
	ipv6Only := map[v1.IPFamily]netip.Addr{v1.IPv4Protocol: loopback4, v1.IPv6Protocol: v6}
	noNodeIP := map[v1.IPFamily]netip.Addr{v1.IPv4Protocol: loopback4, v1.IPv6Protocol: loopback6}

	primary, localhost, all := config.NodePortAddressesPrimary, config.NodePortAddressesLocalhost, config.NodePortAddressesAll
	cases := []struct {
		name      string
		addresses []string
		nodeIPs   map[v1.IPFamily]netip.Addr
		want      []string
	}{
		{"literal CIDRs pass through unchanged", []string{"10.0.0.0/8", "fd01::/64"}, dualStack, []string{"10.0.0.0/8", "fd01::/64"}},
		{"primary on dual-stack node", []string{primary}, dualStack, []string{"192.168.1.1/32", "fd00::1/128"}},
		{"primary on IPv4-only node", []string{primary}, ipv4Only, []string{"192.168.1.1/32"}},
		{"primary on IPv6-only node", []string{primary}, ipv6Only, []string{"fd00::1/128"}},
		{"primary without node IPs", []string{primary}, noNodeIP, nil},
		{"primary with a missing family", []string{primary}, map[v1.IPFamily]netip.Addr{v1.IPv4Protocol: v4}, []string{"192.168.1.1/32"}},
		{"localhost on dual-stack node", []string{localhost}, dualStack, []string{"127.0.0.0/8", "::1/128"}},
		{"localhost on IPv6-only node", []string{localhost}, ipv6Only, []string{"127.0.0.0/8", "::1/128"}},
		{"all on dual-stack node", []string{all}, dualStack, []string{"0.0.0.0/0", "::/0"}},
		{"primary combined with localhost", []string{primary, localhost}, dualStack, []string{"192.168.1.1/32", "fd00::1/128", "127.0.0.0/8", "::1/128"}},
		{"keyword combined with literal CIDR", []string{localhost, "10.0.0.0/8"}, ipv4Only, []string{"127.0.0.0/8", "::1/128", "10.0.0.0/8"}},
		{"empty", nil, dualStack, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := expandNodePortAddresses(tc.addresses, tc.nodeIPs)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("expandNodePortAddresses(%v) (-want +got):\n%s", tc.addresses, diff)
			}
		})
	}
}

// Semantics of upstream's NewNodePortAddresses / MatchAll / GetNodeIPs.
func TestNodePortAddresses(t *testing.T) {
	local := parseAddrs("127.0.0.1", "192.168.0.2", "192.168.0.3", "10.1.2.3", "::1", "fd00::2", "2001:db8::5", "::ffff:172.16.0.9")
	cases := []struct {
		name      string
		family    v1.IPFamily
		cidrs     []string
		wantAll   bool
		wantCIDRs []string
		wantMatch []string
	}{
		{name: "no CIDRs serves all", family: v1.IPv4Protocol, wantAll: true},
		{name: "only the other family serves all", family: v1.IPv4Protocol, cidrs: []string{"fd00::/64"}, wantAll: true},
		{name: "IPv6 with only IPv4 CIDRs serves all", family: v1.IPv6Protocol, cidrs: []string{"192.168.0.0/24"}, wantAll: true},
		{name: "zero CIDR serves all", family: v1.IPv4Protocol, cidrs: []string{"192.168.0.0/24", "0.0.0.0/0"}, wantAll: true},
		{name: "zero CIDR first serves all", family: v1.IPv4Protocol, cidrs: []string{"0.0.0.0/0", "192.168.0.0/24"}, wantAll: true},
		{name: "IPv6 zero CIDR", family: v1.IPv6Protocol, cidrs: []string{"::/0"}, wantAll: true},
		{name: "zero CIDR of the other family is ignored", family: v1.IPv4Protocol, cidrs: []string{"::/0", "192.168.0.0/24"},
			wantCIDRs: []string{"192.168.0.0/24"}, wantMatch: []string{"192.168.0.2", "192.168.0.3"}},
		{name: "IPv4 CIDRs", family: v1.IPv4Protocol, cidrs: []string{"192.168.0.2/32", "10.0.0.0/8", "fd00::/64"},
			wantCIDRs: []string{"192.168.0.2/32", "10.0.0.0/8"}, wantMatch: []string{"10.1.2.3", "192.168.0.2"}},
		{name: "unmasked CIDR is masked", family: v1.IPv4Protocol, cidrs: []string{"192.168.0.77/24"},
			wantCIDRs: []string{"192.168.0.0/24"}, wantMatch: []string{"192.168.0.2", "192.168.0.3"}},
		{name: "overlapping CIDRs match once", family: v1.IPv4Protocol, cidrs: []string{"192.168.0.0/24", "192.168.0.2/32"},
			wantCIDRs: []string{"192.168.0.0/24", "192.168.0.2/32"}, wantMatch: []string{"192.168.0.2", "192.168.0.3"}},
		{name: "IPv4-mapped local addresses match IPv4 CIDRs", family: v1.IPv4Protocol, cidrs: []string{"172.16.0.0/12"},
			wantCIDRs: []string{"172.16.0.0/12"}, wantMatch: []string{"172.16.0.9"}},
		{name: "loopback CIDR matches loopback", family: v1.IPv4Protocol, cidrs: []string{"127.0.0.0/8"},
			wantCIDRs: []string{"127.0.0.0/8"}, wantMatch: []string{"127.0.0.1"}},
		{name: "IPv6 CIDRs", family: v1.IPv6Protocol, cidrs: []string{"fd00::/64", "::1/128", "10.0.0.0/8"},
			wantCIDRs: []string{"fd00::/64", "::1/128"}, wantMatch: []string{"::1", "fd00::2"}},
		{name: "no local address in the CIDRs", family: v1.IPv6Protocol, cidrs: []string{"fd99::/64"},
			wantCIDRs: []string{"fd99::/64"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := newNodePortAddresses(tc.family, tc.cidrs)
			if n.all != tc.wantAll {
				t.Errorf("all = %v, want %v", n.all, tc.wantAll)
			}
			var gotCIDRs []string
			for _, c := range n.cidrs {
				gotCIDRs = append(gotCIDRs, c.String())
			}
			if diff := cmp.Diff(tc.wantCIDRs, gotCIDRs, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("cidrs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(parseAddrs(tc.wantMatch...), n.match(local), cmpopts.EquateEmpty(), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("match (-want +got):\n%s", diff)
			}
		})
	}
}

// expandNodePortAddresses then newNodePortAddresses, as the daemon uses them.
func TestNodePortAddressesFromKeywords(t *testing.T) {
	nodeIPs := map[v1.IPFamily]netip.Addr{v1.IPv4Protocol: netip.MustParseAddr("192.168.0.2"), v1.IPv6Protocol: netip.MustParseAddr("::1")}
	local := parseAddrs("127.0.0.1", "192.168.0.2", "192.168.0.3", "::1", "fd00::2")
	expanded := expandNodePortAddresses([]string{config.NodePortAddressesPrimary}, nodeIPs)

	v4 := newNodePortAddresses(v1.IPv4Protocol, expanded)
	if v4.all || !cmp.Equal(v4.match(local), parseAddrs("192.168.0.2"), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })) {
		t.Errorf("IPv4 primary: all=%v match=%v, want only 192.168.0.2", v4.all, v4.match(local))
	}
	// The IPv6 node IP is loopback: nothing to pin to, so all IPv6 addresses serve
	// NodePorts (as upstream).
	if v6 := newNodePortAddresses(v1.IPv6Protocol, expanded); !v6.all {
		t.Errorf("IPv6 with a loopback node IP: all = false, want true")
	}
}
