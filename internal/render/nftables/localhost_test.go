package nftables

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/trace"
	"github.com/kproxy/kproxy/internal/trace/nfttrace"
)

// localhostNodePortViews are the localhost NodePort cases: a TCP NodePort with an
// endpoint (3001), a UDP one without endpoints (3053), an SCTP one (3077) and a
// ClusterIP-only Service (no NodePort, nothing to reject).
func localhostNodePortViews(family knftables.Family) []*model.ServicePortView {
	clusterIP := func(i string) string { return "172.30.0.4" + i }
	epIP := func(i string) string { return "10.180.0." + i }
	if family == knftables.IPv6Family {
		clusterIP = func(i string) string { return "fd30::4" + i }
		epIP = func(i string) string { return "fd10::" + i }
	}
	tcp := svcPort("ns1", "web", "http", v1.ProtocolTCP, clusterIP("1"), 80)
	tcp.NodePort = 3001
	udp := svcPort("ns1", "dns", "dns", v1.ProtocolUDP, clusterIP("2"), 53)
	udp.NodePort = 3053
	sctp := svcPort("ns1", "sig", "sig", v1.ProtocolSCTP, clusterIP("3"), 7777)
	sctp.NodePort = 3077
	return []*model.ServicePortView{
		view(tcp, ep(epIP("1"), 8080, false)),
		view(udp),
		view(sctp, ep(epIP("3"), 7777, true)),
		view(svcPort("ns1", "internal", "http", v1.ProtocolTCP, clusterIP("4"), 80), ep(epIP("4"), 8080, false)),
	}
}

func TestLocalhostNodePortsRejectedProtocols(t *testing.T) {
	for _, tc := range []struct {
		l    LocalhostNodePorts
		want []v1.Protocol
	}{
		{LocalhostNodePorts{}, nil},
		{LocalhostNodePorts{Enabled: true}, []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}},
		{LocalhostNodePorts{Enabled: true, Proxied: true}, []v1.Protocol{v1.ProtocolUDP, v1.ProtocolSCTP}},
	} {
		if got := tc.l.RejectedProtocols(); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: RejectedProtocols() = %v, want %v", tc.l, got, tc.want)
		}
		for _, p := range LocalhostNodePortRejectableProtocols {
			if got, want := tc.l.rejects(p), slices.Contains(tc.want, p); got != want {
				t.Errorf("%+v: rejects(%s) = %v, want %v", tc.l, p, got, want)
			}
		}
	}
	if got := LocalhostNodePortRejectedCounter(v1.ProtocolSCTP); got != "localhost-nodeport-rejected-sctp" {
		t.Errorf("counter name %q, want upstream's", got)
	}
}

// TestLocalhostNodePortsOffRendersNothing: with the gate off nothing of the
// feature appears, whatever the Services.
func TestLocalhostNodePortsOffRendersNothing(t *testing.T) {
	for _, family := range []knftables.Family{knftables.IPv4Family, knftables.IPv6Family} {
		fake, _ := programFull(t, testConfig(family), localhostNodePortViews(family)...)
		if dump := fake.Dump(); strings.Contains(dump, "localhost") || strings.Contains(dump, "counter") {
			t.Errorf("%s: gate off, yet the table has localhost NodePort objects:\n%s", family, dump)
		}
	}
}

// TestFlowsLocalhostNodePorts traces what the node sends to loopback NodePorts: the
// table never DNATs them; with the gate on, the protocols nothing serves there are
// rejected (TCP too unless the userspace proxy serves it), other NodePorts and
// non-NodePort loopback ports are left alone, and NodePorts on the node's address
// still reach the endpoints.
func TestFlowsLocalhostNodePorts(t *testing.T) {
	type flow struct {
		name      string
		protocol  string
		dest      string
		port      int
		off, on   string // outputs with the gate off, on without the proxy
		onProxied string // and on with the proxy
	}
	v4 := []flow{
		{"tcp NodePort on 127.0.0.1", "tcp", "127.0.0.1", 3001, "ACCEPT", "REJECT", "ACCEPT"},
		{"tcp NodePort on 127.0.0.2", "tcp", "127.0.0.2", 3001, "ACCEPT", "REJECT", "ACCEPT"},
		{"udp NodePort without endpoints on 127.0.0.1", "udp", "127.0.0.1", 3053, "ACCEPT", "REJECT", "REJECT"},
		{"sctp NodePort on 127.0.0.1", "sctp", "127.0.0.1", 3077, "ACCEPT", "REJECT", "REJECT"},
		{"tcp port 3053 (a UDP NodePort) on 127.0.0.1", "tcp", "127.0.0.1", 3053, "ACCEPT", "ACCEPT", "ACCEPT"},
		{"tcp non-NodePort on 127.0.0.1", "tcp", "127.0.0.1", 3002, "ACCEPT", "ACCEPT", "ACCEPT"},
		{"tcp NodePort on the node IP", "tcp", testNodeIP, 3001, "10.180.0.1:8080", "10.180.0.1:8080", "10.180.0.1:8080"},
		{"udp NodePort without endpoints on the node IP", "udp", testNodeIP, 3053, "REJECT", "REJECT", "REJECT"},
	}
	v6 := []flow{
		{"tcp NodePort on ::1", "tcp", "::1", 3001, "ACCEPT", "REJECT", "ACCEPT"},
		{"udp NodePort on ::1", "udp", "::1", 3053, "ACCEPT", "REJECT", "REJECT"},
		{"sctp NodePort on ::1", "sctp", "::1", 3077, "ACCEPT", "REJECT", "REJECT"},
		{"tcp non-NodePort on ::1", "tcp", "::1", 3002, "ACCEPT", "ACCEPT", "ACCEPT"},
		{"tcp NodePort on the node IP", "tcp", "fd00::2", 3001, "[fd10::1]:8080", "[fd10::1]:8080", "[fd10::1]:8080"},
	}
	for _, family := range []knftables.Family{knftables.IPv4Family, knftables.IPv6Family} {
		flows, nodeIP := v4, testNodeIP
		if family == knftables.IPv6Family {
			flows, nodeIP = v6, "fd00::2"
		}
		forEachLayout(t, func(t *testing.T, endpointMaps bool) {
			for _, mode := range []struct {
				name string
				l    LocalhostNodePorts
				want func(flow) string
			}{
				{"gate off", LocalhostNodePorts{}, func(f flow) string { return f.off }},
				{"gate on", LocalhostNodePorts{Enabled: true}, func(f flow) string { return f.on }},
				{"gate on, proxied", LocalhostNodePorts{Enabled: true, Proxied: true}, func(f flow) string { return f.onProxied }},
			} {
				t.Run(string(family)+"/"+mode.name, func(t *testing.T) {
					cfg := testConfig(family)
					cfg.EndpointMaps = endpointMaps
					cfg.LocalhostNodePorts = mode.l
					fake, _ := programFull(t, cfg, localhostNodePortViews(family)...)
					tracer, err := nfttrace.New(fake, []string{nodeIP})
					if err != nil {
						t.Fatal(err)
					}
					if err := tracer.Validate(); err != nil {
						t.Fatalf("ruleset not understood by the tracer: %v", err)
					}
					var kernelFlows []flowTest
					for _, f := range flows {
						src := nodeIP
						if netipIsLoopback(f.dest) {
							src = f.dest
						}
						kernelFlows = append(kernelFlows, flowTest{name: f.name, source: src, local: true, protocol: f.protocol, dest: f.dest, port: f.port})
						res, err := tracer.Trace(trace.Packet{SourceIP: src, DestIP: f.dest, DestPort: f.port, SourcePort: 40000,
							Protocol: f.protocol, LocallyGenerated: true})
						if err != nil {
							t.Fatalf("%s: trace: %v", f.name, err)
						}
						if got, want := res.Output(), mode.want(f); got != want {
							t.Errorf("%s: got %q, want %q\n%s", f.name, got, want, res.TraceString())
						}
					}
					checkKernelTraces(t, fake, kernelFlows, []string{nodeIP})
				})
			}
		})
	}
}

func netipIsLoopback(s string) bool { return s == "::1" || strings.HasPrefix(s, "127.") }

// TestPlanLocalhostNodePortsToggle: turning the feature on, switching the proxy on
// and off, and turning it off again by base-fragment deltas gives what a full
// render gives each time (counters and reject chains added before use, deleted
// after the last reference).
func TestPlanLocalhostNodePortsToggle(t *testing.T) {
	cfg := testConfig(knftables.IPv4Family)
	views := append(localhostNodePortViews(knftables.IPv4Family), scaleViews(10, 2)...)
	fake, st := programFull(t, cfg, views...)
	for i, l := range []LocalhostNodePorts{
		{Enabled: true},
		{Enabled: true, Proxied: true},
		{Enabled: true},
		{},
		{Enabled: true, Proxied: true},
		{},
	} {
		cfg.LocalhostNodePorts = l
		base := RenderBase(cfg)
		tx := fake.NewTransaction()
		plan := planInto(tx, st, &base, updatesBetween(st, renderFragments(cfg, views)), PlanOptions{})
		if err := fake.Run(context.Background(), tx); err != nil {
			t.Fatalf("step %d (%+v): delta failed: %v\n%s", i, l, err, tx.String())
		}
		st.Commit(plan)
		want, _ := programFull(t, cfg, views...)
		if diff := cmp.Diff(canonicalDump(want), canonicalDump(fake)); diff != "" {
			t.Errorf("step %d (%+v): old + delta differs from a full render (-want +got):\n%s", i, l, diff)
		}
	}
}

// TestRefreshLocalhostNodePortCounters: a full sync that refreshes the table keeps
// the values of the counters it still renders and deletes those it no longer does
// (left by a run with other settings), as upstream's add-then-delete does.
func TestRefreshLocalhostNodePortCounters(t *testing.T) {
	cfg := testConfig(knftables.IPv4Family)
	cfg.LocalhostNodePorts = LocalhostNodePorts{Enabled: true}
	views := localhostNodePortViews(knftables.IPv4Family)
	fake, _ := programFull(t, cfg, views...)
	udp := LocalhostNodePortRejectedCounter(v1.ProtocolUDP)
	fake.Table.Counters[udp].Packets = knftables.PtrTo[uint64](7)
	fake.Table.Counters[udp].Bytes = knftables.PtrTo[uint64](420)

	ctx := context.Background()
	all, err := fake.ListAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all["counter"]) != 3 {
		t.Fatalf("listed counters %v, want the three of every protocol", all["counter"])
	}
	cfg.LocalhostNodePorts.Proxied = true
	st := renderAll(cfg, views...)
	tx := fake.NewTransaction()
	WriteRefresh(tx, st, &Existing{Chains: all["chain"], Sets: all["set"], Maps: all["map"], Counters: all["counter"]})
	if err := fake.Run(ctx, tx); err != nil {
		t.Fatalf("refresh refused: %v\n%s", err, tx.String())
	}
	tcp := LocalhostNodePortRejectedCounter(v1.ProtocolTCP)
	if _, ok := fake.Table.Counters[tcp]; ok {
		t.Errorf("the refresh kept %s, which the state no longer has", tcp)
	}
	if c := fake.Table.Counters[udp]; c == nil || c.Packets == nil || *c.Packets != 7 {
		t.Errorf("the refresh lost the value of %s: %+v", udp, c)
	}
	want, _ := programFull(t, cfg, views...)
	want.Table.Counters[udp].Packets, want.Table.Counters[udp].Bytes = fake.Table.Counters[udp].Packets, fake.Table.Counters[udp].Bytes
	if diff := cmp.Diff(sortedDump(want.Dump()), sortedDump(fake.Dump())); diff != "" {
		t.Errorf("refreshed table (-want +got):\n%s", diff)
	}
}
