package ipvs

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/render/rendertest"
	"github.com/kproxy/kproxy/internal/trace"
	"github.com/kproxy/kproxy/internal/trace/ipvstrace"
)

// fuzzPackets are traced through every state FuzzTrace loads: arriving and
// locally generated, to the seed's ClusterIPs, NodePort and LB addresses.
var fuzzPackets = []trace.Packet{
	{SourceIP: "10.0.0.1", DestIP: "172.30.0.1", DestPort: 80, InputInterface: "eth0"},
	{SourceIP: "203.0.113.9", DestIP: "172.30.0.5", DestPort: 80, InputInterface: "eth0"},
	{SourceIP: flowNodeIP, DestIP: "172.30.0.2", DestPort: 80, LocallyGenerated: true},
	{SourceIP: "203.0.113.9", DestIP: flowNodeIP, DestPort: 30000, InputInterface: "eth0"},
	{SourceIP: "10.0.0.1", DestIP: "172.30.0.1", Protocol: "udp", DestPort: 80, InputInterface: "veth0"},
}

// fuzzSeed is the state of the scale test's first Services (NodePorts, LBs with
// source ranges, affinity, eTP Local), with its sets as `ipset save` text.
func fuzzSeed(t testing.TB) (*ipvstrace.State, []byte) {
	var views []*model.ServicePortView
	for i := range 12 {
		views = append(views, rendertest.ScaleView(i, 2))
	}
	st := programmedState(t, testConfig(v1.IPv4Protocol), views)
	var b strings.Builder
	for _, s := range st.Sets {
		b.WriteString(ipset.CreateLine(s.Set) + "\n")
		for _, e := range s.Entries {
			b.WriteString("add " + s.Set.Name + " " + e + "\n")
		}
	}
	return st, []byte(b.String())
}

// FuzzTrace: the ipvs mode's iptables-save and ipset save (what `kube-proxy
// trace` reads in ipvs mode besides the virtual servers) load into the ipvs
// evaluator (internal/trace/ipvstrace) or fail, never panic; a packet traced
// through what loaded gets outcomes whose probabilities add up to 1
// (trace.Result.Check), or an error. The virtual servers are the seed's.
func FuzzTrace(f *testing.F) {
	seed, sets := fuzzSeed(f)
	f.Add(seed.Save, sets)
	f.Add(seed.Save, []byte("create KUBE-CLUSTER-IP hash:ip,port family inet\nadd KUBE-CLUSTER-IP 172.30.0.1,tcp:80\n"))
	f.Fuzz(func(t *testing.T, save, setsText []byte) {
		saved, err := ipset.ParseSaveSets(setsText)
		if err != nil {
			return
		}
		st := *seed
		st.Save, st.Sets = save, saved
		tr, err := ipvstrace.New(&st, false)
		if err != nil {
			return
		}
		for _, p := range fuzzPackets {
			if res, err := tr.Trace(p); err == nil {
				if err := res.Check(); err != nil {
					t.Fatalf("%+v: %v", p, err)
				}
			}
		}
	})
}

// TestFuzzSeedTraces: the seed traces the fuzz packets without error, most of
// them through a virtual server, so that the fuzzer starts from inputs that
// reach IPVS.
func TestFuzzSeedTraces(t *testing.T) {
	st, sets := fuzzSeed(t)
	saved, err := ipset.ParseSaveSets(sets)
	if err != nil {
		t.Fatal(err)
	}
	st.Sets = saved
	tr, err := ipvstrace.New(st, false)
	if err != nil {
		t.Fatal(err)
	}
	taken := 0
	for _, p := range fuzzPackets {
		res, err := tr.Trace(p)
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		if err := res.Check(); err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		if strings.Contains(res.TraceString(), "ip_vs_in") {
			taken++
		}
	}
	if taken < 3 {
		t.Errorf("only %d of the fuzz packets reach a virtual server", taken)
	}
}
