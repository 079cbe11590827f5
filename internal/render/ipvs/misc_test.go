package ipvs

import (
	"bytes"
	"context"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/model"
	ipt "github.com/kproxy/kproxy/internal/render/iptables"
	"github.com/kproxy/kproxy/internal/render/rendertest"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"valid", func(*Config) {}, ""},
		{"family", func(c *Config) { c.Family = "IPv5" }, "unsupported IP family"},
		{"any scheduler", func(c *Config) { c.Scheduler = "twos" }, ""},
		{"masquerade bit", func(c *Config) { c.MasqueradeBit = 32 }, "masquerade bit"},
		{"detector", func(c *Config) { c.LocalDetector = model.LocalDetector{Mode: model.DetectClusterCIDR} }, "needs at least one CIDR"},
		{"nodeport address", func(c *Config) { c.NodePortAddresses.IPs = addrs("fd00::1") }, "NodePort address"},
		{"host address", func(c *Config) { c.HostAddresses = addrs("fd00::1") }, "host address"},
		{"node ip", func(c *Config) { c.NodeIP = addrs("fd00::1")[0] }, "node IP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(v1.IPv4Protocol)
			tc.mutate(cfg)
			err := cfg.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// Upstream's IPv6 names: "KUBE-6-" and at most 31 characters.
func TestSetNames(t *testing.T) {
	for id, want := range map[SetID]string{
		SetClusterIP:              "KUBE-6-CLUSTER-IP",
		SetNodePortLocalSCTP:      "KUBE-6-NODE-PORT-LOCAL-SCTP-HAS",
		SetLoadBalancerSourceCIDR: "KUBE-6-LOAD-BALANCER-SOURCE-CID",
	} {
		if got := SetName(id, v1.IPv6Protocol); got != want {
			t.Errorf("SetName(%d, IPv6) = %q, want %q", id, got, want)
		}
	}
	for _, s := range slices.Concat(Sets(v1.IPv4Protocol), Sets(v1.IPv6Protocol)) {
		if len(s.Name) > maxSetName {
			t.Errorf("set name %q is longer than %d", s.Name, maxSetName)
		}
	}
	if got := Sets(v1.IPv4Protocol)[SetIPVSAddresses].Name; got != "KUBE-IPVS-IPS" {
		t.Errorf("Sets()[SetIPVSAddresses] = %q", got)
	}
}

// Every case's rules restored into the iptables Fake, then the jumps: every
// target exists, and the Fake's iptables-save gives back the rendered rules.
func TestRulesRestore(t *testing.T) {
	ctx := context.Background()
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			cfg, vs := tc.build(t)
			d := Render(cfg, vs)
			var buf bytes.Buffer
			d.WriteRules(&buf)
			fake := iptables.NewFake(tc.family)
			if err := fake.Restore(ctx, buf.Bytes()); err != nil {
				t.Fatalf("restore: %v\n%s", err, buf.String())
			}
			for _, j := range JumpRules() {
				if _, err := fake.EnsureRule(ctx, true, iptables.Table(j.Table), iptables.Chain(j.Chain), j.Args...); err != nil {
					t.Fatalf("jump %v: %v", j, err)
				}
			}
			st := ipt.NewState(&d.Rules, nil)
			for _, table := range ipt.Tables() {
				got, want := rendertest.KubeChains(fake.Dump(iptables.Table(table))), st.DumpTable(table)
				if got != want {
					t.Errorf("%s after restore:\n%s\nwant:\n%s", table, got, want)
				}
			}
		})
	}
}

func TestJumpRules(t *testing.T) {
	var b strings.Builder
	for _, j := range JumpRules() {
		b.WriteString("-t " + string(j.Table) + " -I " + j.Chain + " " + strings.Join(j.Args, " ") + "\n")
		if !slices.Contains(Chains(j.Table), j.Target) {
			t.Errorf("jump to %s, which is not a chain of table %s", j.Target, j.Table)
		}
	}
	checkGolden(t, "jump-rules.txt", b.String())
}

// Chains lists exactly the chains of Desired.Rules, sorted as render/iptables
// keeps a Fragment's.
func TestChains(t *testing.T) {
	d := Render(testConfig(v1.IPv4Protocol), nil)
	var got []string
	for _, c := range d.Rules.Chains {
		got = append(got, string(c.Table)+"/"+c.Name)
	}
	var want []string
	for _, table := range ipt.Tables() {
		for _, c := range Chains(table) {
			want = append(want, string(table)+"/"+c)
		}
	}
	if !slices.Equal(got, want) || !slices.IsSorted(want) {
		t.Errorf("chains %v, Chains() %v (must be equal and sorted)", got, want)
	}
}

// Assembling the fragments in any order, or re-rendering only what changed,
// gives the same state as a full render.
func TestAssembleIncremental(t *testing.T) {
	cfg := testConfig(v1.IPv4Protocol)
	views := rendertest.ScaleViews(200, 3)
	want := Render(cfg, views)

	frags := RenderServices(cfg, views)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(frags), func(i, j int) { frags[i], frags[j] = frags[j], frags[i] })
	if got := Assemble(cfg, append(frags, nil)); !reflect.DeepEqual(got, want) {
		t.Fatalf("shuffled fragments give another state:\n%s", got.Dump())
	}

	// Service 7 loses its endpoints; only its fragment is rendered again.
	changed := rendertest.ScaleView(7, 0)
	views[7] = changed
	for i, f := range frags {
		if f.Name == changed.Name {
			frags[i] = RenderService(cfg, changed)
		}
	}
	if got, want := Assemble(cfg, frags).Dump(), Render(cfg, views).Dump(); got != want {
		t.Errorf("incremental assembly differs from a full render")
	}
}

func TestDescribe(t *testing.T) {
	sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "10.20.30.41", 80)
	sp.NodePort = 3001
	sp.StickyMaxAgeSeconds = 10800
	sp.LoadBalancerVIPs = addrs("1.2.3.4")
	sp.LoadBalancerSourceRanges = prefixes("203.0.113.0/24")
	f := RenderService(testConfig(v1.IPv4Protocol), view(sp, ep("10.180.0.1", 80, true), ep("10.180.0.2", 80, false)))
	checkGolden(t, "describe.txt", strings.Join(f.Describe(v1.IPv4Protocol), "\n")+"\n")
}

func BenchmarkRender10k(b *testing.B) {
	cfg := testConfig(v1.IPv4Protocol)
	views := rendertest.ScaleViews(10000, 10)
	b.ReportAllocs()
	b.ResetTimer()
	var d *Desired
	for b.Loop() {
		d = Render(cfg, views)
	}
	b.ReportMetric(float64(len(d.Services)), "virtual-servers")
}

// BenchmarkAssemble10k is the incremental path's fixed cost: the fragments are
// kept, only assembling runs.
func BenchmarkAssemble10k(b *testing.B) {
	cfg := testConfig(v1.IPv4Protocol)
	frags := RenderServices(cfg, rendertest.ScaleViews(10000, 10))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		Assemble(cfg, frags)
	}
}
