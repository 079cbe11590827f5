package ipttrace

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/kproxy/kproxy/internal/trace"
)

// fuzzPackets are traced through every ruleset the fuzzer loads: arriving and
// locally generated, to the seeds' ClusterIP, NodePort and load balancer
// addresses.
var fuzzPackets = map[bool][]trace.Packet{
	false: {
		{SourceIP: "10.0.0.1", DestIP: "172.30.0.41", DestPort: 80, InputInterface: "eth0"},
		{SourceIP: "10.180.0.2", DestIP: "172.30.0.41", Protocol: "sctp", DestPort: 7777, LocallyGenerated: true},
		{SourceIP: "203.0.113.9", DestIP: "192.168.0.2", DestPort: 30080, InputInterface: "eth0"},
		{SourceIP: "203.0.113.9", DestIP: "1.2.3.4", Protocol: "udp", DestPort: 80, InputInterface: "eth0", Mark: 0x4000},
	},
	true: {
		{SourceIP: "fd00::9", DestIP: "fd30::41", DestPort: 80, InputInterface: "eth0"},
		{SourceIP: "fd00::9", DestIP: "fd00::2", DestPort: 30080, LocallyGenerated: true, CTState: "established"},
	},
}

// FuzzNew: iptables-save output (what `kube-proxy trace` reads in iptables mode)
// loads into a Tracer or fails, never panics; a packet traced through a loaded
// ruleset gets outcomes whose probabilities add up to 1, or an error. The first
// byte chooses the family.
func FuzzNew(f *testing.F) {
	files, err := filepath.Glob("../../render/iptables/testdata/*.iptables")
	if err != nil || len(files) == 0 {
		f.Fatalf("no expected-output files: %v", err)
	}
	files = append(files, "testdata/kproxy-nft-save-ipv4.txt")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		v6 := filepath.Base(file) == "base-ipv6.iptables"
		f.Add(v6, data)
	}
	f.Add(false, []byte(buildSave("nat -A PREROUTING -m statistic --mode random --probability 0.5 -j KUBE-A\nnat -A KUBE-A -j DNAT --to-destination 10.0.0.1:80\nnat -A KUBE-A -j KUBE-A")))
	f.Fuzz(func(t *testing.T, v6 bool, save []byte) {
		local := []netip.Addr{netip.MustParseAddr("192.168.0.2")}
		if v6 {
			local = []netip.Addr{netip.MustParseAddr("fd00::2")}
		}
		tr, err := New(save, v6, local)
		if err != nil {
			return
		}
		for _, p := range fuzzPackets[v6] {
			res, err := tr.Trace(p)
			if err != nil {
				continue
			}
			if err := res.Check(); err != nil {
				t.Fatalf("%+v: %v", p, err)
			}
		}
	})
}
