package node

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestGetHostname(t *testing.T) {
	tests := []struct {
		override, hostname string
		hostErr            error
		want               string
		wantErr            bool
	}{
		{override: " Node-1.Example.COM ", want: "node-1.example.com"},
		{hostname: "MyHost\n", want: "myhost"},
		{hostname: "  ", wantErr: true},
		{hostErr: errors.New("boom"), wantErr: true},
	}
	for _, tc := range tests {
		got, err := getHostname(tc.override, func() (string, error) { return tc.hostname, tc.hostErr })
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("getHostname(%q) with hostname %q = %q, %v; want %q, err=%v", tc.override, tc.hostname, got, err, tc.want, tc.wantErr)
		}
	}
	if _, err := GetHostname("x"); err != nil {
		t.Errorf("GetHostname: %v", err)
	}
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func nodeWith(addresses ...v1.NodeAddress) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}, Status: v1.NodeStatus{Addresses: addresses}}
}

func internal(ip string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip} }
func external(ip string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeExternalIP, Address: ip} }

func TestNodeHostIPs(t *testing.T) {
	tests := []struct {
		name string
		node *v1.Node
		want []netip.Addr
	}{
		{"nil node", nil, nil},
		{"no addresses", nodeWith(v1.NodeAddress{Type: v1.NodeHostName, Address: "node1"}), nil},
		{"internal before external", nodeWith(external("203.0.113.1"), internal("10.0.0.1")), addrs("10.0.0.1")},
		{"external only", nodeWith(external("203.0.113.1")), addrs("203.0.113.1")},
		{"dual-stack: first of each family", nodeWith(internal("10.0.0.1"), internal("10.0.0.2"), internal("fd00::1"), internal("fd00::2")), addrs("10.0.0.1", "fd00::1")},
		{"IPv6 primary, IPv4 from external", nodeWith(internal("fd00::1"), external("203.0.113.1")), addrs("fd00::1", "203.0.113.1")},
		{"invalid skipped", nodeWith(internal("not-an-ip"), internal("10.0.0.1")), addrs("10.0.0.1")},
		{"sloppy IPv4", nodeWith(internal("010.000.000.001")), addrs("10.0.0.1")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, NodeHostIPs(tc.node), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("NodeHostIPs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDetectNodeIPs(t *testing.T) {
	lo4, lo6 := netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()
	tests := []struct {
		name        string
		raw         []netip.Addr
		bind        string
		wantPrimary v1.IPFamily
		want4       netip.Addr
		want6       netip.Addr
	}{
		{"nothing: loopback", nil, "0.0.0.0", v1.IPv4Protocol, lo4, lo6},
		{"nothing, :: bind", nil, "::", v1.IPv4Protocol, lo4, lo6},
		{"node IPv4", addrs("10.0.0.1"), "0.0.0.0", v1.IPv4Protocol, netip.MustParseAddr("10.0.0.1"), lo6},
		{"node IPv6", addrs("fd00::1"), "", v1.IPv6Protocol, lo4, netip.MustParseAddr("fd00::1")},
		{"node dual IPv6 primary", addrs("fd00::1", "10.0.0.1"), "0.0.0.0", v1.IPv6Protocol, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")},
		{"bind address wins", addrs("10.0.0.1", "fd00::1"), "fd00::99", v1.IPv6Protocol, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::99")},
		{"bind address without node IPs", nil, "192.168.1.5", v1.IPv4Protocol, netip.MustParseAddr("192.168.1.5"), lo6},
		{"unparseable bind address ignored", addrs("10.0.0.1"), "garbage", v1.IPv4Protocol, netip.MustParseAddr("10.0.0.1"), lo6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			primary, ips := DetectNodeIPs(context.Background(), tc.raw, tc.bind)
			if primary != tc.wantPrimary || ips[v1.IPv4Protocol] != tc.want4 || ips[v1.IPv6Protocol] != tc.want6 {
				t.Errorf("DetectNodeIPs = %s %v; want %s %s %s", primary, ips, tc.wantPrimary, tc.want4, tc.want6)
			}
		})
	}
}

func TestSupportedFamilies(t *testing.T) {
	ctx := context.Background()
	both := Families{IPv4: true, IPv6: true}
	tests := []struct {
		name    string
		probe   KernelProbe
		backend Families
		want    Families
	}{
		{"IPv6 enabled", FakeProbe{Present: true}, both, both},
		{"IPv6 disabled", FakeProbe{Present: true, Disabled: true}, both, Families{IPv4: true}},
		{"no IPv6 in kernel", FakeProbe{}, both, Families{IPv4: true}},
		{"backend without IPv6", FakeProbe{Present: true}, Families{IPv4: true}, Families{IPv4: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := SupportedFamilies(ctx, tc.probe, tc.backend); got != tc.want {
				t.Errorf("SupportedFamilies = %+v, want %+v", got, tc.want)
			}
		})
	}
	if err := (Families{IPv4: true}).CheckPrimary(ctx, v1.IPv6Protocol); !errors.Is(err, ErrPrimaryFamilyUnsupported) {
		t.Errorf("CheckPrimary = %v", err)
	}
	if err := both.CheckPrimary(ctx, v1.IPv6Protocol); err != nil {
		t.Errorf("CheckPrimary = %v", err)
	}
}

func TestProcProbe(t *testing.T) {
	root := t.TempDir()
	probe := ProcProbe{Root: root}
	if present, _ := probe.IPv6(); present {
		t.Fatal("no if_inet6: want absent")
	}
	mustWrite(t, filepath.Join(root, "net", "if_inet6"), "")
	if present, disabled := probe.IPv6(); !present || disabled {
		t.Fatalf("if_inet6 and no switch: got present=%v disabled=%v", present, disabled)
	}
	switchPath := filepath.Join(root, "sys", "net", "ipv6", "conf", "all", "disable_ipv6")
	mustWrite(t, switchPath, "1\n")
	if present, disabled := probe.IPv6(); !present || !disabled {
		t.Fatalf("disable_ipv6=1: got present=%v disabled=%v", present, disabled)
	}
	mustWrite(t, switchPath, "0\n")
	if _, disabled := probe.IPv6(); disabled {
		t.Fatal("disable_ipv6=0: want enabled")
	}
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
