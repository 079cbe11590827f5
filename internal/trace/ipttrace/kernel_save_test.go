package ipttrace

import (
	"os"
	"testing"

	"github.com/kproxy/kproxy/internal/trace"
)

// testdata/kproxy-nft-save-ipv4.txt is what iptables-nft-save (v1.8.9) printed, with
// --counters, in a network namespace where kproxy's jump rules and a full sync were
// applied (render/iptables's TestKernelFlows does the same at every run, as root): an
// LB Service with source ranges that hold the node (ns1/svc1: 172.30.0.41, LB IPs
// 1.2.3.5 and 1.2.3.6, NodePort 3001, endpoint 10.180.0.1) and a ClientIP Service
// (ns2/svc2: 172.30.0.42, endpoints 10.180.0.2 and 10.180.1.2). It keeps the
// kernel's spelling and order (rules grouped by chain, "[0:0]" counters, "#" lines)
// for the tests that run without root.
func TestKernelSpelledSave(t *testing.T) {
	save, err := os.ReadFile("testdata/kproxy-nft-save-ipv4.txt")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(save, false, addrs("192.168.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	const sepOf2 = "KUBE-SEP-J7UNSSMXXN3UTZD6" // ns2/svc2's endpoint 10.180.1.2
	for _, tc := range []struct {
		name   string
		pkt    trace.Packet
		recent []string // clients in sepOf2's list
		output string
		masq   bool
	}{
		{name: "pod to ClusterIP", pkt: trace.Packet{SourceIP: "10.0.0.2", DestIP: "172.30.0.41", DestPort: 80, InputInterface: "veth0"},
			output: "10.180.0.1:80"},
		{name: "external to NodePort", pkt: trace.Packet{SourceIP: "203.0.113.2", DestIP: "192.168.0.2", DestPort: 3001, InputInterface: "eth0"},
			output: "10.180.0.1:80", masq: true},
		{name: "allowed external to LB", pkt: trace.Packet{SourceIP: "203.0.113.2", DestIP: "1.2.3.5", DestPort: 80, InputInterface: "eth0"},
			output: "10.180.0.1:80", masq: true},
		{name: "blocked external to LB", pkt: trace.Packet{SourceIP: "203.0.113.130", DestIP: "1.2.3.6", DestPort: 80, InputInterface: "eth0"},
			output: "DROP"},
		{name: "node to LB", pkt: trace.Packet{SourceIP: "192.168.0.2", DestIP: "1.2.3.6", DestPort: 80, LocallyGenerated: true},
			output: "10.180.0.1:80", masq: true},
		{name: "affinity: first connection spread", pkt: trace.Packet{SourceIP: "10.0.0.2", DestIP: "172.30.0.42", DestPort: 80, InputInterface: "veth0"},
			output: "10.180.0.2:80, 10.180.1.2:80"},
		{name: "affinity: remembered client", pkt: trace.Packet{SourceIP: "10.0.0.2", DestIP: "172.30.0.42", DestPort: 80, InputInterface: "veth0"},
			recent: []string{"10.0.0.2"}, output: "10.180.1.2:80"},
		{name: "established connection", pkt: trace.Packet{SourceIP: "10.0.0.2", DestIP: "10.180.1.2", DestPort: 80, InputInterface: "veth0", CTState: "established"},
			output: "ACCEPT"},
		{name: "invalid dropped", pkt: trace.Packet{SourceIP: "10.0.0.2", DestIP: "10.180.1.2", DestPort: 80, InputInterface: "veth0", CTState: "invalid"},
			output: "DROP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := tr
			if tc.recent != nil {
				tr = tr.WithRecent(sepOf2, addrs(tc.recent...)...)
			}
			res, err := tr.Trace(tc.pkt)
			if err != nil {
				t.Fatal(err)
			}
			if res.Output() != tc.output || res.Masquerade != tc.masq {
				t.Errorf("got %q masq %v, want %q masq %v\n%s", res.Output(), res.Masquerade, tc.output, tc.masq, res.TraceString())
			}
			checkProbabilities(t, res)
		})
	}
}
