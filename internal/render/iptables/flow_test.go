package iptables

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/render/rendertest"
	"github.com/kproxy/kproxy/internal/trace"
	"github.com/kproxy/kproxy/internal/trace/ipttrace"
)

// The packet-flow tests trace packets with internal/trace/ipttrace through the rules
// kproxy's iptables mode programs (the jump rules, then a full sync), as upstream's
// iptables proxier tests do with their tracer; the cases are upstream's
// (TestOverallIPTablesRules, TestNoEndpointsReject, TestClusterIPGeneral,
// TestLoadBalancer, TestNodePorts, TestHealthCheckNodePort, TestDropInvalidRule,
// TestExternalTrafficPolicyLocal/Cluster, TestInternalTrafficPolicy,
// TestInternalExternalMasquerade), with the node's own traffic sent as locally
// generated. kernel_flow_test.go traces the same scenarios through what the kernel
// gives back.

const (
	testNodeIP         = "192.168.0.2"
	testNodeIP2        = "192.168.1.2"
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
	ctState  string
	dest     string
	port     int
	output   string // Result.Output(): endpoints, or DROP / REJECT / ACCEPT
	masq     bool
	// hairpin, when set, is the endpoint whose outcome alone must be masqueraded.
	hairpin string
	// recent fills -m recent lists (ClientIP affinity): list name -> clients.
	recent map[string][]string
}

// flowScenario is a configuration, Services and the flows to trace through them.
type flowScenario struct {
	name  string
	cfg   *Config
	views []*model.ServicePortView
	flows []flowTest
}

// localAddrs are the node's addresses the tracer is told about.
func localAddrs(family v1.IPFamily) []netip.Addr {
	if family == v1.IPv6Protocol {
		return addrs("fd00::2")
	}
	return addrs(testNodeIP, testNodeIP2)
}

// programmedSave is iptables-save output of every table after what the proxier
// does on a first sync: ensure the jump rules, then restore the full sync.
func programmedSave(t testing.TB, cfg *Config, views ...*model.ServicePortView) []byte {
	t.Helper()
	fake := iptables.NewFake(cfg.Family)
	ctx := context.Background()
	for _, j := range JumpRules() {
		if _, err := fake.EnsureChain(ctx, iptablesTable(j.Table), iptablesChain(j.Target)); err != nil {
			t.Fatal(err)
		}
		if _, err := fake.EnsureRule(ctx, true, iptablesTable(j.Table), iptablesChain(j.Chain), j.Args...); err != nil {
			t.Fatal(err)
		}
	}
	input, _ := fullInput(cfg, views...)
	if err := fake.Restore(ctx, []byte(input)); err != nil {
		t.Fatalf("full sync failed: %v\n%s", err, input)
	}
	return []byte(fake.DumpAll())
}

// traceFlow traces f's packet: from a pod (veth0) or from outside (eth0), or
// locally generated.
func traceFlow(tr *ipttrace.Tracer, f flowTest) (*trace.Result, error) {
	p := trace.Packet{SourceIP: f.source, DestIP: f.dest, DestPort: f.port, SourcePort: 40000,
		Protocol: f.protocol, CTState: f.ctState, LocallyGenerated: f.local}
	if !f.local {
		p.InputInterface = "eth0"
		src := netip.MustParseAddr(f.source)
		if netip.MustParsePrefix("10.0.0.0/8").Contains(src) || netip.MustParsePrefix("fd10::/64").Contains(src) {
			p.InputInterface = "veth0"
		}
	}
	for name, clients := range f.recent {
		tr = tr.WithRecent(name, addrs(clients...)...)
	}
	return tr.Trace(p)
}

// checkFlow reports how res differs from what f expects.
func checkFlow(f flowTest, res *trace.Result) []string {
	return rendertest.CheckFlow(res, f.output, f.masq, f.hairpin)
}

func runFlowScenario(t *testing.T, sc flowScenario, save []byte) {
	t.Helper()
	tr, err := ipttrace.New(save, sc.cfg.Family == v1.IPv6Protocol, localAddrs(sc.cfg.Family))
	if err != nil {
		t.Fatalf("rules not understood by the tracer: %v", err)
	}
	for _, f := range sc.flows {
		t.Run(f.name, func(t *testing.T) {
			res, err := traceFlow(tr, f)
			if err != nil {
				t.Fatalf("trace: %v", err)
			}
			if errs := checkFlow(f, res); errs != nil {
				t.Errorf("%s -> %s:%d: %s\n%s", f.source, f.dest, f.port, strings.Join(errs, "; "), res.TraceString())
			}
		})
	}
}

func TestFlows(t *testing.T) {
	for _, sc := range flowScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			runFlowScenario(t, sc, programmedSave(t, sc.cfg, sc.views...))
		})
	}
}

// TestFlowShares: with N endpoints each gets 1/N of the new connections, from the
// probabilities the kernel stores (1/3 is 0.33333333349).
func TestFlowShares(t *testing.T) {
	cfg := testConfig(v1.IPv4Protocol)
	sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80)
	var eps []*model.Endpoint
	for i := 1; i <= 5; i++ {
		eps = append(eps, ep(fmt.Sprintf("10.180.0.%d", i), 80, false))
	}
	tr, err := ipttrace.New(programmedSave(t, cfg, view(sp, eps...)), false, localAddrs(cfg.Family))
	if err != nil {
		t.Fatal(err)
	}
	res, err := traceFlow(tr, flowTest{source: testPodIP, dest: "172.30.0.41", port: 80})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Outcomes) != 5 {
		t.Fatalf("%d outcomes, want 5:\n%s", len(res.Outcomes), res.TraceString())
	}
	for _, o := range res.Outcomes {
		if math.Abs(o.Probability-0.2) > 1e-9 {
			t.Errorf("%s: probability %g, want 0.2", o.DNAT, o.Probability)
		}
	}
}

func flowScenarios() []flowScenario {
	var out []flowScenario
	out = append(out, masqueradeScenarios()...)
	return append(out,
		noEndpointsAndFirewallScenario(),
		loadBalancerScenario(),
		nodePortAllAddressesScenario(),
		localhostNodePortsScenario(),
		hairpinScenario(),
		sessionAffinityScenario(),
		ipv6Scenario(),
	)
}
