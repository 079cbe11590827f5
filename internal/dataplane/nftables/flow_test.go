package nftables

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/dataplane/dptest"
	"github.com/kproxy/kproxy/internal/trace"
	"github.com/kproxy/kproxy/internal/trace/nfttrace"
)

type flow struct {
	name   string
	source string
	local  bool
	proto  string
	dest   string
	port   int
	output string
	masq   bool
}

// checkPackets traces packets through what the Proxier programmed into the Fake.
func (f *fixture) checkPackets(flows []flow) {
	f.t.Helper()
	tracer, err := nfttrace.New(f.nft.Fake, []string{testNodeIP})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := tracer.Validate(); err != nil {
		f.t.Fatalf("ruleset not understood by the tracer: %v", err)
	}
	for _, tc := range flows {
		f.t.Run(tc.name, func(t *testing.T) {
			p := trace.Packet{SourceIP: tc.source, SourcePort: 40000, DestIP: tc.dest, DestPort: tc.port,
				Protocol: tc.proto, LocallyGenerated: tc.local}
			if !tc.local {
				p.InputInterface = "eth0"
			}
			res, err := tracer.Trace(p)
			if err != nil {
				t.Fatalf("trace: %v", err)
			}
			if got := res.Output(); got != tc.output || res.Masquerade != tc.masq {
				t.Errorf("%s -> %s:%d: got %q masq=%v, want %q masq=%v\n%s",
					tc.source, tc.dest, tc.port, got, res.Masquerade, tc.output, tc.masq, res.TraceString())
			}
		})
	}
}

func TestPacketsAfterSync(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.State.OnServiceAdd(dptest.Service("ns3", "empty", "172.30.0.41", dptest.WithPort("", v1.ProtocolTCP, 80, 8080)))
	f.sync()

	f.checkPackets([]flow{
		{name: "pod to ClusterIP", source: "10.0.1.9", dest: "172.30.0.10", port: 80, output: "10.0.1.1:8080, 10.0.2.1:8080"},
		{name: "external to ClusterIP", source: "203.0.113.2", dest: "172.30.0.10", port: 80, output: "10.0.1.1:8080, 10.0.2.1:8080", masq: true},
		{name: "node to ClusterIP", source: testNodeIP, local: true, dest: "172.30.0.10", port: 80, output: "10.0.1.1:8080, 10.0.2.1:8080", masq: true},
		{name: "pod to UDP ClusterIP", source: "10.0.1.9", proto: "udp", dest: "172.30.0.53", port: 53, output: "10.0.1.2:5353, 10.0.2.2:5353"},
		{name: "wrong port of a ClusterIP", source: "10.0.1.9", dest: "172.30.0.10", port: 81, output: "REJECT"},
		{name: "unallocated ClusterIP", source: "10.0.1.9", dest: "172.30.0.99", port: 80, output: "DROP"},
		{name: "ClusterIP without endpoints", source: "10.0.1.9", dest: "172.30.0.41", port: 80, output: "REJECT"},
		{name: "eTP Local LB without local endpoints", source: "203.0.113.2", dest: "1.2.3.4", port: 80, output: "DROP"},
		{name: "eTP Local NodePort without local endpoints", source: "203.0.113.2", dest: testNodeIP, port: 30080, output: "DROP"},
		{name: "pod to eTP Local LB short-circuits", source: "10.0.1.9", dest: "1.2.3.4", port: 80, output: "10.0.2.3:8080"},
	})

	// After a delta: the new endpoint is reachable, the removed one is not.
	f.State.UpdateEndpointSlice(nil, dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP,
		dptest.Ready("10.0.1.1", testNodeName), dptest.Ready("10.0.3.1", "node-c")))
	f.State.UpdateEndpointSlice(nil, dptest.Slice("ns2", "lb", "lb-1", 8080, "http", v1.ProtocolTCP,
		dptest.Ready("10.0.2.3", "node-b"), dptest.Ready("10.0.1.3", testNodeName)))
	f.sync()
	if f.lastWasFullRewrite() {
		t.Fatal("endpoint changes rewrote the whole table")
	}
	f.checkPackets([]flow{
		{name: "pod to ClusterIP after delta", source: "10.0.1.9", dest: "172.30.0.10", port: 80, output: "10.0.1.1:8080, 10.0.3.1:8080"},
		{name: "external to eTP Local LB after delta", source: "203.0.113.2", dest: "1.2.3.4", port: 80, output: "10.0.1.3:8080"},
		{name: "external to eTP Local NodePort after delta", source: "203.0.113.2", dest: testNodeIP, port: 30080, output: "10.0.1.3:8080"},
	})
}
