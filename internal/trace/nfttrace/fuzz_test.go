package nfttrace

import (
	"os"
	"testing"

	"github.com/kproxy/kproxy/internal/nft/nfttext"
	"github.com/kproxy/kproxy/internal/trace"
)

// fuzzPackets are traced through every ruleset the fuzzer loads: arriving and
// locally generated, to the seeds' ClusterIP, NodePort and load balancer
// addresses, in both families.
var fuzzPackets = []trace.Packet{
	{SourceIP: "10.0.0.1", DestIP: "172.30.0.42", DestPort: 80, InputInterface: "eth0"},
	{SourceIP: "10.180.0.2", DestIP: "172.30.0.42", Protocol: "udp", DestPort: 53, LocallyGenerated: true},
	{SourceIP: "203.0.113.9", DestIP: "192.168.0.2", DestPort: 30080, InputInterface: "eth0"},
	{SourceIP: "203.0.113.9", DestIP: "1.2.3.4", Protocol: "sctp", DestPort: 80, InputInterface: "eth0", Mark: 0x4000},
	{SourceIP: "fd00::9", DestIP: "fd30::42", DestPort: 80, InputInterface: "eth0", CTState: "established"},
}

// FuzzTraceListing: the kernel's listing of a table (`nft list table`, what
// `kube-proxy trace` reads) loads into a Tracer (nfttext.ParseListing,
// FromListing, New, Validate) or fails, never panics; a packet traced through a
// loaded ruleset gets outcomes whose probabilities add up to 1, or an error.
func FuzzTraceListing(f *testing.F) {
	data, err := os.ReadFile("../../app/testdata/trace-listing-ip.nft")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(data))
	f.Add("table ip6 kube-proxy {\n\tchain nat-prerouting {\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n\t\tip6 daddr fd30::42 tcp dport 80 dnat to [fd00::1]:8080\n\t}\n}\n")
	f.Add("table ip t {\n\tchain c {\n\t\ttype filter hook forward priority 0; policy drop;\n\t\tnumgen random mod 2 vmap { 0 : jump a, 1 : drop }\n\t}\n\tchain a {\n\t\tjump c\n\t}\n}\n")
	f.Fuzz(func(t *testing.T, text string) {
		l, err := nfttext.ParseListing(text)
		if err != nil {
			return
		}
		fake, err := FromListing(l)
		if err != nil {
			return
		}
		tr, err := New(fake, []string{"192.168.0.2", "fd00::2"})
		if err != nil {
			return
		}
		_ = tr.Validate()
		for _, p := range fuzzPackets {
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
