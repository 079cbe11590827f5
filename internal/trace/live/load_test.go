package live

import (
	"context"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/ipvs"
	"github.com/kproxy/kproxy/internal/trace"
	"github.com/kproxy/kproxy/internal/trace/ipvstrace"
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
	if _, err := Load(ctx, r, "userspace", v1.IPv4Protocol); err == nil {
		t.Error("userspace mode loaded")
	}
	r.Listings["ip kube-proxy"] = "table ip kube-proxy {\n\tchain c {\n\t\tfrobnicate\n\t}\n}\n"
	if _, err := Load(ctx, r, "nftables", v1.IPv4Protocol); err == nil || !strings.Contains(err.Error(), "frobnicate") {
		t.Errorf("bad listing: %v", err)
	}
}

// ipvsSave is the skeleton of the ipvs mode's rules: a ClusterIP's masquerade
// for off-cluster sources, and KUBE-POSTROUTING.
const ipvsSave = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-SERVICES - [0:0]
-A PREROUTING -j KUBE-SERVICES
-A OUTPUT -j KUBE-SERVICES
-A POSTROUTING -j KUBE-POSTROUTING
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MASQUERADE --random-fully
-A KUBE-SERVICES ! -s 10.0.0.0/8 -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ
COMMIT
`

const ipvsSets = `create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x1
add KUBE-CLUSTER-IP 172.30.0.42,tcp:80
create KUBE-6-CLUSTER-IP hash:ip,port family inet6 hashsize 1024 maxelem 65536
`

// TestLoadIPVS loads the ipvs mode's state (rules, sets, virtual servers and a
// persistence template) and traces packets through it.
func TestLoadIPVS(t *testing.T) {
	vip := netip.MustParseAddr("172.30.0.42")
	vs := ipvs.VirtualServer{Address: vip, Protocol: v1.ProtocolTCP, Port: 80, Scheduler: "rr", Flags: ipvs.FlagPersistent, Timeout: 10800}
	r := &Fake{
		Saves:     map[v1.IPFamily][]byte{v1.IPv4Protocol: []byte(ipvsSave)},
		IPSetSave: ipvsSets,
		IPVSState: map[v1.IPFamily]ipvstrace.IPVS{v1.IPv4Protocol: {
			Services: []ipvstrace.Service{{VS: vs, Reals: []ipvs.RealServer{
				{Address: netip.MustParseAddr("10.180.0.2"), Port: 8080, Weight: 1},
				{Address: netip.MustParseAddr("10.180.1.2"), Port: 8080, Weight: 1},
			}}},
			Templates: []ipvstrace.Template{
				{Client: netip.MustParseAddr("10.0.0.9"), VS: vs.Key(), Real: netip.MustParseAddrPort("10.180.1.2:8080")},
			},
		}},
		Addresses: map[v1.IPFamily][]netip.Addr{v1.IPv4Protocol: {netip.MustParseAddr("192.168.0.2"), vip}},
	}
	l, err := Load(context.Background(), r, "ipvs", v1.IPv4Protocol)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		src, output string
		masq        bool
	}{
		{"10.0.0.2", "10.180.0.2:8080, 10.180.1.2:8080", false},
		{"203.0.113.5", "10.180.0.2:8080, 10.180.1.2:8080", true},
		{"10.0.0.9", "10.180.1.2:8080", false}, // its template
	} {
		res, err := l.Trace(trace.Packet{SourceIP: tc.src, DestIP: vip.String(), DestPort: 80, InputInterface: "eth0"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Output() != tc.output || res.Masquerade != tc.masq || res.Check() != nil {
			t.Errorf("from %s: %q masquerade %v, want %q masquerade %v\n%s", tc.src, res.Output(), res.Masquerade, tc.output, tc.masq, res.TraceString())
		}
	}
	if !strings.Contains(l.Ruleset, "ipset save") {
		t.Errorf("ruleset %q", l.Ruleset)
	}
}

func TestParseTemplates(t *testing.T) {
	text := `Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData
TCP 0A000009 0000 AC1E002A 0050 0AB40102 1F90 NONE          10779
TCP 0A000009 9C40 AC1E002A 0050 0AB40102 1F90 ESTABLISHED     899
UDP fd00:0000:0000:0000:0000:0000:0000:0009 0000 fd00:0000:0000:0000:0000:0000:0000:0042 0035 fd00:0000:0000:0000:0000:0000:0000:0002 0035 NONE 100
`
	got := parseTemplates(text, v1.IPv4Protocol)
	want := []ipvstrace.Template{{Client: netip.MustParseAddr("10.0.0.9"),
		VS:   ipvs.Key{Address: netip.MustParseAddr("172.30.0.42"), Protocol: v1.ProtocolTCP, Port: 80},
		Real: netip.MustParseAddrPort("10.180.1.2:8080")}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("templates %v, want %v", got, want)
	}
	// IPv6 addresses are written out in full (%pI6).
	want6 := []ipvstrace.Template{{Client: netip.MustParseAddr("fd00::9"),
		VS:   ipvs.Key{Address: netip.MustParseAddr("fd00::42"), Protocol: v1.ProtocolUDP, Port: 53},
		Real: netip.MustParseAddrPort("[fd00::2]:53")}}
	if got := parseTemplates(text, v1.IPv6Protocol); !reflect.DeepEqual(got, want6) {
		t.Errorf("IPv6 templates %v, want %v", got, want6)
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
