package live

import (
	"context"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/trace"
)

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLoad loads each mode's ruleset as the kernel spells it (an nft listing and
// an iptables-nft-save, both captured from a kernel) and traces a packet, the
// iptables one with the kernel's recent list of an affinity endpoint.
func TestLoad(t *testing.T) {
	node := netip.MustParseAddr("192.168.0.2")
	r := &Fake{
		Listings: map[string]string{"ip kube-proxy": mustRead(t, "../../app/testdata/trace-listing-ip.nft")},
		Saves:    map[v1.IPFamily][]byte{v1.IPv4Protocol: []byte(mustRead(t, "../ipttrace/testdata/kproxy-nft-save-ipv4.txt"))},
		Recent: map[v1.IPFamily]map[string][]netip.Addr{v1.IPv4Protocol: {
			"KUBE-SEP-J7UNSSMXXN3UTZD6": {netip.MustParseAddr("10.0.0.2")},
		}},
		Addresses: map[v1.IPFamily][]netip.Addr{v1.IPv4Protocol: {node}},
	}
	ctx := context.Background()
	for _, tc := range []struct {
		mode, ruleset string
		pkt           trace.Packet
		output        string
	}{
		{"nftables", "nft list table ip kube-proxy",
			trace.Packet{SourceIP: "203.0.113.5", DestIP: "1.2.3.4", DestPort: 80, InputInterface: "eth0"}, "10.180.0.2:80"},
		{"nftables", "nft list table ip kube-proxy",
			trace.Packet{SourceIP: "203.0.113.200", DestIP: "1.2.3.4", DestPort: 80, InputInterface: "eth0"}, "DROP"},
		{"iptables", "iptables-save (fake)",
			trace.Packet{SourceIP: "10.0.0.2", DestIP: "172.30.0.42", DestPort: 80, InputInterface: "veth0"}, "10.180.1.2:80"},
		{"iptables", "iptables-save (fake)",
			trace.Packet{SourceIP: "10.0.0.3", DestIP: "172.30.0.42", DestPort: 80, InputInterface: "veth0"}, "10.180.0.2:80, 10.180.1.2:80"},
	} {
		l, err := Load(ctx, r, tc.mode, v1.IPv4Protocol)
		if err != nil {
			t.Fatalf("%s: %v", tc.mode, err)
		}
		res, err := l.Trace(tc.pkt)
		if err != nil {
			t.Fatal(err)
		}
		if l.Ruleset != tc.ruleset || res.Output() != tc.output {
			t.Errorf("%s %s -> %s: %s %q, want %s %q\n%s", tc.mode, tc.pkt.SourceIP, tc.pkt.DestIP, l.Ruleset, res.Output(), tc.ruleset, tc.output, res.TraceString())
		}
	}
	if _, err := Load(ctx, r, "nftables", v1.IPv6Protocol); err == nil || !strings.Contains(err.Error(), "no table ip6 kube-proxy") {
		t.Errorf("missing table: %v", err)
	}
	if _, err := Load(ctx, r, "ipvs", v1.IPv4Protocol); err == nil {
		t.Error("ipvs mode loaded")
	}
	r.Listings["ip kube-proxy"] = "table ip kube-proxy {\n\tchain c {\n\t\tfrobnicate\n\t}\n}\n"
	if _, err := Load(ctx, r, "nftables", v1.IPv4Protocol); err == nil || !strings.Contains(err.Error(), "frobnicate") {
		t.Errorf("bad listing: %v", err)
	}
}

func TestParseRecent(t *testing.T) {
	text := "src=10.0.0.2 ttl: 64 last_seen: 4295 oldest_pkt: 1 4295\nsrc=fd00::2 ttl: 64 last_seen: 4296 oldest_pkt: 1 4296\n"
	if got := parseRecent(text, v1.IPv4Protocol); !reflect.DeepEqual(got, []netip.Addr{netip.MustParseAddr("10.0.0.2")}) {
		t.Errorf("IPv4: %v", got)
	}
	if got := parseRecent(text, v1.IPv6Protocol); !reflect.DeepEqual(got, []netip.Addr{netip.MustParseAddr("fd00::2")}) {
		t.Errorf("IPv6: %v", got)
	}
}
