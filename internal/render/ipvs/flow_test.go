package ipvs

import (
	"bytes"
	"context"
	"math"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/ipvs"
	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/render/rendertest"
	"github.com/kproxy/kproxy/internal/trace"
	"github.com/kproxy/kproxy/internal/trace/ipvstrace"
)

// The packet-flow tests trace packets with internal/trace/ipvstrace (the
// iptables rules by ipttrace, IPVS between them) through the kernel state the
// ipvs mode programs for a first sync: the jump rules and the restored chains,
// the sets, the virtual servers, and kube-ipvs0's addresses. The node is
// testConfig's (100.101.102.103, pods in 10.0.0.0/8).

const (
	flowNodeIP   = "100.101.102.103"
	flowExternal = "203.0.113.2"
	flowPod      = "10.0.0.2"
)

// ipvsFlow is one packet and where it must go.
type ipvsFlow struct {
	name   string
	source string
	local  bool // locally generated (from a host-network process)
	proto  string
	dest   string
	port   int
	// output is Result.Output(): endpoints, or DROP / REJECT / ACCEPT.
	output string
	masq   bool
	// hairpin, when set, is the only DNAT target whose path is masqueraded.
	hairpin string
	// templates are persistence templates: client -> real server, of the
	// destination's virtual server.
	templates map[string]string
}

type ipvsScenario struct {
	name   string
	family v1.IPFamily // IPv4 when empty
	views  []*model.ServicePortView
	flows  []ipvsFlow
}

// programmedState is what the kernel holds after the proxier's first sync of
// views: the jumps and the chains (iptables-save of a fake), the sets, the
// virtual servers, and the node's addresses with kube-ipvs0's.
func programmedState(t testing.TB, cfg *Config, views []*model.ServicePortView) *ipvstrace.State {
	t.Helper()
	d := Render(cfg, views)
	fake := iptables.NewFake(cfg.Family)
	ctx := context.Background()
	for _, j := range JumpRules() {
		if _, err := fake.EnsureChain(ctx, iptables.Table(j.Table), iptables.Chain(j.Target)); err != nil {
			t.Fatal(err)
		}
		if _, err := fake.EnsureRule(ctx, true, iptables.Table(j.Table), iptables.Chain(j.Chain), j.Args...); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	d.WriteRules(&buf)
	if err := fake.Restore(ctx, buf.Bytes()); err != nil {
		t.Fatalf("restore: %v\n%s", err, buf.String())
	}
	st := &ipvstrace.State{Save: []byte(fake.DumpAll())}
	for _, c := range d.Sets {
		st.Sets = append(st.Sets, ipset.SavedSet{Contents: c})
	}
	for _, s := range d.Services {
		st.Services = append(st.Services, ipvstrace.Service{VS: s.VS, Reals: s.Reals})
	}
	st.Local = append(append(st.Local, cfg.HostAddresses...), d.Addresses...)
	return st
}

func traceIPVSFlow(t testing.TB, st *ipvstrace.State, v6 bool, f ipvsFlow) (*trace.Result, error) {
	t.Helper()
	s := *st
	for client, to := range f.templates {
		proto := v1.ProtocolTCP
		if f.proto == "udp" {
			proto = v1.ProtocolUDP
		}
		s.Templates = append(s.Templates, ipvstrace.Template{
			Client: netip.MustParseAddr(client), Real: netip.MustParseAddrPort(to),
			VS: ipvsKey(f.dest, proto, f.port),
		})
	}
	tr, err := ipvstrace.New(&s, v6)
	if err != nil {
		return nil, err
	}
	p := trace.Packet{SourceIP: f.source, DestIP: f.dest, DestPort: f.port, SourcePort: 40000,
		Protocol: f.proto, LocallyGenerated: f.local}
	if !f.local {
		p.InputInterface = "eth0"
		if src := netip.MustParseAddr(f.source); netip.MustParsePrefix("10.0.0.0/8").Contains(src) || netip.MustParsePrefix("fd10::/64").Contains(src) {
			p.InputInterface = "veth0"
		}
	}
	return tr.Trace(p)
}

func TestFlows(t *testing.T) {
	for _, sc := range ipvsScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			cfg := testConfig(sc.fam())
			st := programmedState(t, cfg, sc.views)
			for _, f := range sc.flows {
				res, err := traceIPVSFlow(t, st, sc.fam() == v1.IPv6Protocol, f)
				if err != nil {
					t.Errorf("%s: %v", f.name, err)
					continue
				}
				if errs := rendertest.CheckFlow(res, f.output, f.masq, f.hairpin); len(errs) > 0 {
					t.Errorf("%s: %s\n%s", f.name, strings.Join(errs, "; "), res.TraceString())
				}
			}
		})
	}
}

// TestFlowShares: rr gives every real server an equal share, wrr shares by
// weight, and a real server of weight 0 (terminating) none.
func TestFlowShares(t *testing.T) {
	cfg := testConfig(v1.IPv4Protocol)
	sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "10.20.30.41", 80)
	st := programmedState(t, cfg, []*model.ServicePortView{view(sp, ep("10.180.0.1", 80, false), ep("10.180.0.2", 80, false), ep("10.180.0.3", 80, false))})
	f := ipvsFlow{source: flowPod, proto: "tcp", dest: "10.20.30.41", port: 80}
	share := func(res *trace.Result) map[string]float64 {
		out := map[string]float64{}
		for _, o := range res.Outcomes {
			out[o.DNAT] += o.Probability
		}
		return out
	}
	res, err := traceIPVSFlow(t, st, false, f)
	if err != nil {
		t.Fatal(err)
	}
	for ep, p := range share(res) {
		if math.Abs(p-1.0/3) > 1e-9 {
			t.Errorf("rr: %s has share %v, want 1/3", ep, p)
		}
	}
	st.Services[0].VS.Scheduler = "wrr"
	st.Services[0].Reals[0].Weight = 0
	st.Services[0].Reals[1].Weight = 3
	res, err = traceIPVSFlow(t, st, false, f)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"10.180.0.2:80": 0.75, "10.180.0.3:80": 0.25}
	got := share(res)
	for ep, p := range want {
		if math.Abs(got[ep]-p) > 1e-9 {
			t.Errorf("wrr: shares %v, want %v\n%s", got, want, res.TraceString())
		}
	}
	if len(got) != len(want) {
		t.Errorf("wrr: shares %v, want %v", got, want)
	}
}

func ipvsKey(addr string, proto v1.Protocol, port int) ipvs.Key {
	return ipvs.Key{Address: netip.MustParseAddr(addr), Protocol: proto, Port: uint16(port)}
}

func (sc *ipvsScenario) fam() v1.IPFamily {
	if sc.family == "" {
		return v1.IPv4Protocol
	}
	return sc.family
}

// ipvsScenarios are the suite's common cases over what the renderer programs.
func ipvsScenarios() []ipvsScenario {
	const np = 3001
	both := "10.180.0.1:80, 10.180.1.1:80"
	both6 := "[fd10::5]:80, [fd11::1]:80"
	clusterIP := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "10.20.30.41", 80)
	nodePort := func() *model.ServicePort {
		sp := nodePortService()
		sp.LoadBalancerVIPs = addrs("1.2.3.4")
		sp.ExternalIPs = addrs("50.60.70.81")
		return sp
	}
	etpLocal := func() *model.ServicePort {
		sp := nodePort()
		sp.ExternalPolicyLocal = true
		sp.HealthCheckNodePort = 30000
		return sp
	}
	affinity := func() *model.ServicePort {
		sp := svcPort("ns1", "svc3", "p80", v1.ProtocolTCP, "10.20.30.43", 80)
		sp.StickyMaxAgeSeconds = 10800
		return sp
	}
	hairpin := svcPort("ns1", "svc4", "p80", v1.ProtocolTCP, "10.20.30.44", 80)
	empty := svcPort("ns1", "svc5", "p80", v1.ProtocolUDP, "10.20.30.45", 80)
	return []ipvsScenario{
		{name: "clusterip", views: []*model.ServicePortView{
			view(clusterIP, ep("10.180.0.1", 80, true), ep("10.180.1.1", 80, false)),
		}, flows: []ipvsFlow{
			{name: "from a pod", source: flowPod, proto: "tcp", dest: "10.20.30.41", port: 80, output: both},
			// The local detector: off-cluster sources are masqueraded.
			{name: "from outside", source: flowExternal, proto: "tcp", dest: "10.20.30.41", port: 80, output: both, masq: true},
			{name: "from the node", source: flowNodeIP, local: true, proto: "tcp", dest: "10.20.30.41", port: 80, output: both, masq: true},
			// KUBE-IPVS-FILTER: a Service address on a port no virtual server serves.
			{name: "other port", source: flowPod, proto: "tcp", dest: "10.20.30.41", port: 81, output: "REJECT"},
			{name: "other protocol", source: flowPod, proto: "udp", dest: "10.20.30.41", port: 80, output: "REJECT"},
			// Not a Service address: routed on, untouched.
			{name: "elsewhere", source: flowPod, proto: "tcp", dest: "10.180.1.1", port: 80, output: "ACCEPT"},
		}},
		{name: "nodeport, loadbalancer, externalIPs", views: []*model.ServicePortView{
			view(nodePort(), ep("10.180.0.1", 80, true), ep("10.180.1.1", 80, false)),
		}, flows: []ipvsFlow{
			{name: "nodeport from outside", source: flowExternal, proto: "tcp", dest: flowNodeIP, port: np, output: both, masq: true},
			{name: "nodeport from a pod", source: flowPod, proto: "tcp", dest: flowNodeIP, port: np, output: both, masq: true},
			{name: "nodeport udp: no virtual server", source: flowExternal, proto: "udp", dest: flowNodeIP, port: np, output: "ACCEPT"},
			{name: "loadbalancer from outside", source: flowExternal, proto: "tcp", dest: "1.2.3.4", port: 80, output: both, masq: true},
			{name: "externalIP from outside", source: flowExternal, proto: "tcp", dest: "50.60.70.81", port: 80, output: both, masq: true},
			{name: "externalIP from a pod", source: flowPod, proto: "tcp", dest: "50.60.70.81", port: 80, output: both, masq: true},
		}},
		{name: "external traffic policy local", views: []*model.ServicePortView{
			view(etpLocal(), ep("10.180.0.1", 80, true), ep("10.180.1.1", 80, false)),
		}, flows: []ipvsFlow{
			{name: "nodeport", source: flowExternal, proto: "tcp", dest: flowNodeIP, port: np, output: "10.180.0.1:80"},
			{name: "loadbalancer", source: flowExternal, proto: "tcp", dest: "1.2.3.4", port: 80, output: "10.180.0.1:80"},
			{name: "externalIP", source: flowExternal, proto: "tcp", dest: "50.60.70.81", port: 80, output: "10.180.0.1:80"},
			{name: "clusterIP from outside", source: flowExternal, proto: "tcp", dest: "10.20.30.41", port: 80, output: both, masq: true},
		}},
		// kubernetes#97081: without local endpoints the cluster's, unmasqueraded.
		{name: "external traffic policy local without local endpoints", views: []*model.ServicePortView{
			view(etpLocal(), ep("10.180.1.1", 80, false), ep("10.180.1.2", 80, false)),
		}, flows: []ipvsFlow{
			{name: "nodeport", source: flowExternal, proto: "tcp", dest: flowNodeIP, port: np, output: "10.180.1.1:80, 10.180.1.2:80"},
			{name: "loadbalancer", source: flowExternal, proto: "tcp", dest: "1.2.3.4", port: 80, output: "10.180.1.1:80, 10.180.1.2:80"},
		}},
		{name: "session affinity", views: []*model.ServicePortView{
			view(affinity(), ep("10.180.0.1", 80, false), ep("10.180.1.1", 80, false)),
		}, flows: []ipvsFlow{
			{name: "new client", source: flowPod, proto: "tcp", dest: "10.20.30.43", port: 80, output: both},
			{name: "known client", source: flowPod, proto: "tcp", dest: "10.20.30.43", port: 80, output: "10.180.1.1:80",
				templates: map[string]string{flowPod: "10.180.1.1:80"}},
			{name: "template to a real server gone", source: flowPod, proto: "tcp", dest: "10.20.30.43", port: 80, output: both,
				templates: map[string]string{flowPod: "10.180.9.9:80"}},
		}},
		{name: "no endpoints", views: []*model.ServicePortView{view(empty)}, flows: []ipvsFlow{
			{name: "from a pod", source: flowPod, proto: "udp", dest: "10.20.30.45", port: 80, output: "REJECT"},
			{name: "from the node", source: flowNodeIP, local: true, proto: "udp", dest: "10.20.30.45", port: 80, output: "REJECT", masq: false},
		}},
		// KUBE-LOOP-BACK: a pod reaching itself through the Service is masqueraded.
		{name: "hairpin", views: []*model.ServicePortView{
			view(hairpin, ep("10.180.0.1", 80, true), ep("10.180.1.1", 80, false)),
		}, flows: []ipvsFlow{
			{name: "to itself", source: "10.180.0.1", proto: "tcp", dest: "10.20.30.44", port: 80, output: both, hairpin: "10.180.0.1:80"},
		}},
		// testConfig's IPv6 node: 2001:db8::1:1, pods in fd10::/64.
		{name: "ipv6", family: v1.IPv6Protocol, views: ipv6Views(), flows: []ipvsFlow{
			{name: "clusterip from a pod", source: "fd10::2", proto: "tcp", dest: "fd20::41", port: 80, output: both6},
			{name: "clusterip from outside", source: "2001:db8:9::2", proto: "tcp", dest: "fd20::41", port: 80, output: both6, masq: true},
			{name: "clusterip from the node", source: "2001:db8::1:1", local: true, proto: "tcp", dest: "fd20::41", port: 80, output: both6, masq: true},
			{name: "other port", source: "fd10::2", proto: "tcp", dest: "fd20::41", port: 81, output: "REJECT"},
			{name: "nodeport", source: "2001:db8:9::2", proto: "tcp", dest: "2001:db8::1:1", port: np, output: both6, masq: true},
			{name: "hairpin", source: "fd10::5", proto: "tcp", dest: "fd20::41", port: 80, output: both6, hairpin: "[fd10::5]:80"},
			{name: "no endpoints", source: "fd10::2", proto: "udp", dest: "fd20::45", port: 80, output: "REJECT"},
		}},
	}
}

// ipv6Views are a NodePort Service with a local and a remote endpoint, and a
// ClusterIP without endpoints, in IPv6.
func ipv6Views() []*model.ServicePortView {
	sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "fd20::41", 80)
	sp.NodePort = 3001
	empty := svcPort("ns1", "svc5", "p80", v1.ProtocolUDP, "fd20::45", 80)
	return []*model.ServicePortView{view(sp, ep("fd10::5", 80, true), ep("fd11::1", 80, false)), view(empty)}
}
