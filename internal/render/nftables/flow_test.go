package nftables

import (
	"fmt"
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/trace"
	"github.com/kproxy/kproxy/internal/trace/nfttrace"
)

const (
	testNodeIP         = "192.168.0.2"
	testExternalClient = "203.0.113.2"
	testBlockedClient  = "203.0.113.130"
	testPodIP          = "10.0.0.2"
)

// flowTest is one packet and where it must go, as upstream's packetFlowTest.
type flowTest struct {
	name     string
	source   string
	local    bool // locally generated (from a host-network process)
	protocol string
	dest     string
	port     int
	output   string // nfttrace Result.Output(): endpoints, or DROP / REJECT / ACCEPT
	masq     bool
}

func runFlowTests(t *testing.T, fake *knftables.Fake, tests []flowTest) {
	t.Helper()
	local := []string{testNodeIP, "192.168.1.2"}
	tracer, err := nfttrace.New(fake, local)
	if err != nil {
		t.Fatal(err)
	}
	if err := tracer.Validate(); err != nil {
		t.Fatalf("ruleset not understood by the tracer: %v", err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tracer.Trace(flowPacket(tc))
			if err != nil {
				t.Fatalf("trace: %v", err)
			}
			if got := res.Output(); got != tc.output || res.Masquerade != tc.masq {
				t.Errorf("%s -> %s:%d: got %q masq=%v, want %q masq=%v\n%s",
					tc.source, tc.dest, tc.port, got, res.Masquerade, tc.output, tc.masq, res.TraceString())
			}
		})
	}
	checkKernelTraces(t, fake, tests, local)
}

// flowPacket is the packet of a flow test: from a pod (10.0.0.0/8) it arrives on
// veth0, from elsewhere on eth0, unless locally generated.
func flowPacket(tc flowTest) trace.Packet {
	p := trace.Packet{SourceIP: tc.source, DestIP: tc.dest, DestPort: tc.port, SourcePort: 40000,
		Protocol: tc.protocol, LocallyGenerated: tc.local}
	if !tc.local {
		p.InputInterface = "eth0"
		if netip.MustParsePrefix("10.0.0.0/8").Contains(netip.MustParseAddr(tc.source)) {
			p.InputInterface = "veth0"
		}
	}
	return p
}

// masqueradeServices are upstream's TestInternalExternalMasquerade Services: an LB
// Service, the same with eTP Local, and with iTP Local, each with a local and a
// remote endpoint.
func masqueradeServices() []*model.ServicePortView {
	mk := func(n int, clusterIP, lb string, nodePort int32) *model.ServicePort {
		sp := svcPort("ns"+string(rune('0'+n)), "svc"+string(rune('0'+n)), "p80", v1.ProtocolTCP, clusterIP, 80)
		sp.NodePort = nodePort
		sp.LoadBalancerVIPs = addrs(lb)
		return sp
	}
	svc1 := mk(1, "172.30.0.41", "1.2.3.4", 3001)
	svc2 := mk(2, "172.30.0.42", "5.6.7.8", 3002)
	svc2.ExternalPolicyLocal = true
	svc2.HealthCheckNodePort = 30002
	svc3 := mk(3, "172.30.0.43", "9.10.11.12", 3003)
	svc3.InternalPolicyLocal = true
	return []*model.ServicePortView{
		view(svc1, ep("10.180.0.1", 80, true), ep("10.180.1.1", 80, false)),
		view(svc2, ep("10.180.0.2", 80, true), ep("10.180.1.2", 80, false)),
		view(svc3, ep("10.180.0.3", 80, true), ep("10.180.1.3", 80, false)),
	}
}

func TestInternalExternalMasquerade(t *testing.T) {
	forEachLayout(t, func(t *testing.T, endpointMaps bool) {
		all1, all2, all3 := "10.180.0.1:80, 10.180.1.1:80", "10.180.0.2:80, 10.180.1.2:80", "10.180.0.3:80, 10.180.1.3:80"
		flows := []flowTest{
			{name: "pod to ClusterIP", source: testPodIP, dest: "172.30.0.41", port: 80, output: all1},
			{name: "pod to NodePort", source: testPodIP, dest: testNodeIP, port: 3001, output: all1, masq: true},
			{name: "pod to LB", source: testPodIP, dest: "1.2.3.4", port: 80, output: all1, masq: true},
			{name: "node to ClusterIP", source: testNodeIP, local: true, dest: "172.30.0.41", port: 80, output: all1, masq: true},
			{name: "node to NodePort", source: testNodeIP, local: true, dest: testNodeIP, port: 3001, output: all1, masq: true},
			{name: "node to LB", source: testNodeIP, local: true, dest: "1.2.3.4", port: 80, output: all1, masq: true},
			{name: "external to ClusterIP", source: testExternalClient, dest: "172.30.0.41", port: 80, output: all1, masq: true},
			{name: "external to NodePort", source: testExternalClient, dest: testNodeIP, port: 3001, output: all1, masq: true},
			{name: "external to LB", source: testExternalClient, dest: "1.2.3.4", port: 80, output: all1, masq: true},

			{name: "pod to ClusterIP with eTP:Local", source: testPodIP, dest: "172.30.0.42", port: 80, output: all2},
			{name: "pod to NodePort with eTP:Local", source: testPodIP, dest: testNodeIP, port: 3002, output: all2},
			{name: "pod to LB with eTP:Local", source: testPodIP, dest: "5.6.7.8", port: 80, output: all2},
			{name: "node to ClusterIP with eTP:Local", source: testNodeIP, local: true, dest: "172.30.0.42", port: 80, output: all2, masq: true},
			{name: "node to NodePort with eTP:Local", source: testNodeIP, local: true, dest: testNodeIP, port: 3001, output: all1, masq: true},
			{name: "node to LB with eTP:Local", source: testNodeIP, local: true, dest: "5.6.7.8", port: 80, output: all2, masq: true},
			{name: "external to ClusterIP with eTP:Local", source: testExternalClient, dest: "172.30.0.42", port: 80, output: all2, masq: true},
			{name: "external to NodePort with eTP:Local", source: testExternalClient, dest: testNodeIP, port: 3002, output: "10.180.0.2:80"},
			{name: "external to LB with eTP:Local", source: testExternalClient, dest: "5.6.7.8", port: 80, output: "10.180.0.2:80"},

			{name: "pod to ClusterIP with iTP:Local", source: testPodIP, dest: "172.30.0.43", port: 80, output: "10.180.0.3:80"},
			{name: "pod to NodePort with iTP:Local", source: testPodIP, dest: testNodeIP, port: 3003, output: all3, masq: true},
			{name: "pod to LB with iTP:Local", source: testPodIP, dest: "9.10.11.12", port: 80, output: all3, masq: true},
			{name: "node to ClusterIP with iTP:Local", source: testNodeIP, local: true, dest: "172.30.0.43", port: 80, output: "10.180.0.3:80", masq: true},
			{name: "node to NodePort with iTP:Local", source: testNodeIP, local: true, dest: testNodeIP, port: 3003, output: all3, masq: true},
			{name: "node to LB with iTP:Local", source: testNodeIP, local: true, dest: "9.10.11.12", port: 80, output: all3, masq: true},
			{name: "external to ClusterIP with iTP:Local", source: testExternalClient, dest: "172.30.0.43", port: 80, output: "10.180.0.3:80", masq: true},
			{name: "external to NodePort with iTP:Local", source: testExternalClient, dest: testNodeIP, port: 3003, output: all3, masq: true},
			{name: "external to LB with iTP:Local", source: testExternalClient, dest: "9.10.11.12", port: 80, output: all3, masq: true},
		}
		type override struct {
			output string
			masq   *bool
		}
		no, yes := false, true
		cases := []struct {
			name          string
			masqueradeAll bool
			noDetector    bool
			overrides     map[string]override
		}{
			{name: "base"},
			{name: "no LocalTrafficDetector", noDetector: true, overrides: map[string]override{
				"node to ClusterIP":                    {masq: &no},
				"node to ClusterIP with eTP:Local":     {masq: &no},
				"node to ClusterIP with iTP:Local":     {masq: &no},
				"external to ClusterIP":                {masq: &no},
				"external to ClusterIP with eTP:Local": {masq: &no},
				"external to ClusterIP with iTP:Local": {masq: &no},
				"pod to NodePort with eTP:Local":       {output: "10.180.0.2:80"},
				"pod to LB with eTP:Local":             {output: "10.180.0.2:80"},
			}},
			{name: "masqueradeAll", masqueradeAll: true, overrides: map[string]override{
				"pod to ClusterIP":                {masq: &yes},
				"pod to ClusterIP with eTP:Local": {masq: &yes},
				"pod to ClusterIP with iTP:Local": {masq: &yes},
			}},
			{name: "masqueradeAll, no LocalTrafficDetector", masqueradeAll: true, noDetector: true, overrides: map[string]override{
				"pod to ClusterIP":                {masq: &yes},
				"pod to ClusterIP with eTP:Local": {masq: &yes},
				"pod to ClusterIP with iTP:Local": {masq: &yes},
				"pod to NodePort with eTP:Local":  {output: "10.180.0.2:80"},
				"pod to LB with eTP:Local":        {output: "10.180.0.2:80"},
			}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				cfg := testConfig(knftables.IPv4Family)
				cfg.EndpointMaps = endpointMaps
				cfg.MasqueradeAll = tc.masqueradeAll
				if tc.noDetector {
					cfg.LocalDetector = model.LocalDetector{}
				}
				fake, _ := programFull(t, cfg, masqueradeServices()...)
				tests := make([]flowTest, len(flows))
				applied := 0
				for i, f := range flows {
					if o, ok := tc.overrides[f.name]; ok {
						applied++
						if o.output != "" {
							f.output = o.output
						}
						if o.masq != nil {
							f.masq = *o.masq
						}
					}
					tests[i] = f
				}
				if applied != len(tc.overrides) {
					t.Fatalf("%d overrides match no flow", len(tc.overrides)-applied)
				}
				runFlowTests(t, fake, tests)
			})
		}
	})
}

func TestFlowsNoEndpointsAndFirewall(t *testing.T) {
	forEachLayout(t, func(t *testing.T, endpointMaps bool) {
		cfg := testConfig(knftables.IPv4Family)
		cfg.EndpointMaps = endpointMaps

		noEps := svcPort("ns1", "noeps", "p80", v1.ProtocolTCP, "172.30.0.41", 80)
		noEps.NodePort = 3001
		noEps.ExternalIPs = addrs("192.168.99.11")
		noEps.LoadBalancerVIPs = addrs("1.2.3.4")

		fw := svcPort("ns2", "fw", "p80", v1.ProtocolTCP, "172.30.0.42", 80)
		fw.NodePort = 3002
		fw.LoadBalancerVIPs = addrs("5.6.7.8")
		fw.LoadBalancerSourceRanges = prefixes("203.0.113.0/25")

		noLocal := svcPort("ns3", "nolocal", "p80", v1.ProtocolTCP, "172.30.0.43", 80)
		noLocal.NodePort = 3003
		noLocal.ExternalPolicyLocal = true
		noLocal.LoadBalancerVIPs = addrs("9.10.11.12")

		itpNoLocal := svcPort("ns4", "itp", "p80", v1.ProtocolTCP, "172.30.0.44", 80)
		itpNoLocal.InternalPolicyLocal = true

		udp := svcPort("ns5", "dns", "dns", v1.ProtocolUDP, "172.30.0.45", 53)

		fake, _ := programFull(t, cfg,
			view(noEps),
			view(fw, ep("10.180.0.2", 80, false)),
			view(noLocal, ep("10.180.1.3", 80, false)),
			view(itpNoLocal, ep("10.180.1.4", 80, false)),
			view(udp, ep("10.180.0.5", 5353, false)),
		)
		runFlowTests(t, fake, []flowTest{
			{name: "no endpoints: ClusterIP rejected", source: testPodIP, dest: "172.30.0.41", port: 80, output: "REJECT"},
			{name: "no endpoints: NodePort rejected", source: testExternalClient, dest: testNodeIP, port: 3001, output: "REJECT"},
			{name: "no endpoints: externalIP rejected", source: testExternalClient, dest: "192.168.99.11", port: 80, output: "REJECT"},
			{name: "no endpoints: LB rejected", source: testExternalClient, dest: "1.2.3.4", port: 80, output: "REJECT"},
			{name: "invalid port of a ClusterIP rejected", source: testPodIP, dest: "172.30.0.42", port: 81, output: "REJECT"},
			{name: "unallocated ClusterIP dropped", source: testPodIP, dest: "172.30.0.99", port: 80, output: "DROP"},
			{name: "outside the ServiceCIDRs untouched", source: testPodIP, dest: "172.31.0.1", port: 80, output: "ACCEPT"},
			{name: "LB from allowed range", source: testExternalClient, dest: "5.6.7.8", port: 80, output: "10.180.0.2:80", masq: true},
			{name: "LB from blocked client dropped", source: testBlockedClient, dest: "5.6.7.8", port: 80, output: "DROP"},
			{name: "NodePort ignores source ranges", source: testBlockedClient, dest: testNodeIP, port: 3002, output: "10.180.0.2:80", masq: true},
			{name: "eTP Local without local endpoints: external dropped", source: testExternalClient, dest: "9.10.11.12", port: 80, output: "DROP"},
			{name: "eTP Local without local endpoints: NodePort dropped", source: testExternalClient, dest: testNodeIP, port: 3003, output: "DROP"},
			{name: "eTP Local without local endpoints: pod short-circuited", source: testPodIP, dest: "9.10.11.12", port: 80, output: "10.180.1.3:80"},
			{name: "eTP Local without local endpoints: ClusterIP works", source: testPodIP, dest: "172.30.0.43", port: 80, output: "10.180.1.3:80"},
			{name: "iTP Local without local endpoints: dropped", source: testPodIP, dest: "172.30.0.44", port: 80, output: "DROP"},
			{name: "UDP port to targetPort", source: testPodIP, protocol: "udp", dest: "172.30.0.45", port: 53, output: "10.180.0.5:5353"},
			{name: "TCP to a UDP service port rejected", source: testPodIP, protocol: "tcp", dest: "172.30.0.45", port: 53, output: "REJECT"},
		})
	})
}

func TestFlowsNodePortAllAddresses(t *testing.T) {
	forEachLayout(t, func(t *testing.T, endpointMaps bool) {
		cfg := testConfig(knftables.IPv4Family)
		cfg.EndpointMaps = endpointMaps
		cfg.NodePortAddresses = model.NodePortAddresses{All: true}
		sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80)
		sp.NodePort = 3001
		fake, _ := programFull(t, cfg, view(sp, ep("10.180.0.1", 80, false)))
		runFlowTests(t, fake, []flowTest{
			{name: "primary node IP", source: testExternalClient, dest: testNodeIP, port: 3001, output: "10.180.0.1:80", masq: true},
			{name: "secondary node IP", source: testExternalClient, dest: "192.168.1.2", port: 3001, output: "10.180.0.1:80", masq: true},
			{name: "not a node IP", source: testExternalClient, dest: "192.168.2.2", port: 3001, output: "ACCEPT"},
		})
	})
}

func TestFlowsHairpin(t *testing.T) {
	forEachLayout(t, func(t *testing.T, endpointMaps bool) {
		cfg := testConfig(knftables.IPv4Family)
		cfg.EndpointMaps = endpointMaps
		sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80)
		fake, _ := programFull(t, cfg, view(sp, ep("10.180.0.1", 8080, true), ep("10.180.1.1", 8080, false)))
		tracer, err := nfttrace.New(fake, []string{testNodeIP})
		if err != nil {
			t.Fatal(err)
		}
		res, err := tracer.Trace(trace.Packet{SourceIP: "10.180.0.1", DestIP: "172.30.0.41", DestPort: 80, SourcePort: 40000, InputInterface: "veth0"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Outcomes) != 2 {
			t.Fatalf("want 2 outcomes, got %d:\n%s", len(res.Outcomes), res.TraceString())
		}
		for _, o := range res.Outcomes {
			if wantMasq := o.DNAT == "10.180.0.1:8080"; o.Masquerade != wantMasq {
				t.Errorf("DNAT to %s: masquerade %v, want %v\n%s", o.DNAT, o.Masquerade, wantMasq, res.TraceString())
			}
		}
	})
}

func TestFlowsSessionAffinity(t *testing.T) {
	forEachLayout(t, func(t *testing.T, endpointMaps bool) {
		cfg := testConfig(knftables.IPv4Family)
		cfg.EndpointMaps = endpointMaps
		sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80)
		sp.StickyMaxAgeSeconds = 10800
		fake, _ := programFull(t, cfg, view(sp, ep("10.180.0.1", 80, false), ep("10.180.1.1", 80, false)))
		runFlowTests(t, fake, []flowTest{
			{name: "new client spread", source: testPodIP, dest: "172.30.0.41", port: 80, output: "10.180.0.1:80, 10.180.1.1:80"},
		})
		// A client remembered in an endpoint's affinity set goes back to it.
		set := affinitySetName(&sp.Name, netip.MustParseAddrPort("10.180.1.1:80"), 10800)
		tx := fake.NewTransaction()
		tx.Add(&knftables.Element{Set: set, Key: []string{testPodIP}})
		if err := fake.Run(t.Context(), tx); err != nil {
			t.Fatal(err)
		}
		runFlowTests(t, fake, []flowTest{
			{name: "known client sticks", source: testPodIP, dest: "172.30.0.41", port: 80, output: "10.180.1.1:80"},
		})
	})
}

func TestFlowsLocalDetectors(t *testing.T) {
	forEachLayout(t, func(t *testing.T, endpointMaps bool) {
		sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80)
		detectors := []model.LocalDetector{
			{Mode: model.DetectNodeCIDR, CIDRs: prefixes("10.0.0.0/24")},
			{Mode: model.DetectBridgeInterface, BridgeInterface: "veth0"},
			{Mode: model.DetectInterfaceNamePrefix, InterfaceNamePrefix: "veth"},
		}
		for _, d := range detectors {
			t.Run(string(d.Mode), func(t *testing.T) {
				cfg := testConfig(knftables.IPv4Family)
				cfg.EndpointMaps = endpointMaps
				cfg.LocalDetector = d
				fake, _ := programFull(t, cfg, view(sp, ep("10.180.0.1", 80, false)))
				runFlowTests(t, fake, []flowTest{
					{name: "pod not masqueraded", source: testPodIP, dest: "172.30.0.41", port: 80, output: "10.180.0.1:80"},
					{name: "external masqueraded", source: testExternalClient, dest: "172.30.0.41", port: 80, output: "10.180.0.1:80", masq: true},
				})
			})
		}
	})
}

func TestFlowsIPv6(t *testing.T) {
	forEachLayout(t, func(t *testing.T, endpointMaps bool) {
		cfg := testConfig(knftables.IPv6Family)
		cfg.EndpointMaps = endpointMaps
		sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "fd30::41", 80)
		sp.NodePort = 3001
		sp.LoadBalancerVIPs = addrs("2001:db8::1")
		sp.LoadBalancerSourceRanges = prefixes("2001:db8:1::/64")
		fake, _ := programFull(t, cfg, view(sp, ep("fd10::1", 8080, true), ep("fd10::2", 8080, false)))
		tracer, err := nfttrace.New(fake, []string{"fd00::2"})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			src, dst string
			port     int
			output   string
			masq     bool
		}{
			{"fd10::5", "fd30::41", 80, "[fd10::1]:8080, [fd10::2]:8080", false},
			{"2001:db8:1::5", "2001:db8::1", 80, "[fd10::1]:8080, [fd10::2]:8080", true},
			{"2001:db8:2::5", "2001:db8::1", 80, "DROP", false},
			{"2001:db8:2::5", "fd00::2", 3001, "[fd10::1]:8080, [fd10::2]:8080", true},
			{"fd10::5", "fd30::99", 80, "DROP", false},
		} {
			iif := "eth0"
			if netip.MustParsePrefix("fd10::/64").Contains(netip.MustParseAddr(tc.src)) {
				iif = "veth0"
			}
			res, err := tracer.Trace(trace.Packet{SourceIP: tc.src, DestIP: tc.dst, DestPort: tc.port, SourcePort: 40000, InputInterface: iif})
			if err != nil {
				t.Fatal(err)
			}
			if res.Output() != tc.output || res.Masquerade != tc.masq {
				t.Errorf("%s -> [%s]:%d: got %q masq=%v, want %q masq=%v\n%s", tc.src, tc.dst, tc.port, res.Output(), res.Masquerade, tc.output, tc.masq, res.TraceString())
			}
		}
	})
}

// forEachLayout runs f with endpoints selected by rules and by maps
// (Config.EndpointMaps): both layouts must route every packet alike.
func forEachLayout(t *testing.T, f func(t *testing.T, endpointMaps bool)) {
	for _, endpointMaps := range []bool{false, true} {
		t.Run(fmt.Sprintf("endpointMaps=%v", endpointMaps), func(t *testing.T) { f(t, endpointMaps) })
	}
}
