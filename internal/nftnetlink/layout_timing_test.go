package nftnetlink

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/nft"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// Research experiments on what the kernel charges for a change of a large table
// (docs/nftables.md, "Where a change's time goes"), as benchmarks: they measure the
// machine, not the code, and take minutes, so `go test` never runs them; run one with
// `go test -run '^$' -bench NAME -benchtime 1x`. One iteration is the whole experiment
// (ns/op is its wall time); the figures are custom metrics. They need root and run
// in throwaway network namespaces.

// timeApply applies text reps times (text gets the repetition number via %d) and
// returns the wall times.
func timeApply(tb testing.TB, ex *Executor, reps int, text string) []time.Duration {
	tb.Helper()
	var ds []time.Duration
	for i := range reps {
		start := time.Now()
		if err := ex.apply(context.Background(), oneText(fmt.Sprintf(text, i+1)), true); err != nil {
			tb.Fatalf("%v\n%s", err, fmt.Sprintf(text, i+1))
		}
		ds = append(ds, time.Since(start))
	}
	return ds
}

// syntheticTable is a nat table with a base chain dispatching through a verdict map
// to n chains of rulesPerChain numgen dnat rules each (or, with rulesPerChain 0, one
// rule selecting from a per-chain data map of 10 endpoints).
func syntheticTable(n, rulesPerChain int) string {
	var b strings.Builder
	b.WriteString("add table ip kube-proxy\n")
	b.WriteString("add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; }\n")
	b.WriteString("add chain ip kube-proxy nat-output { type nat hook output priority -100 ; }\n")
	b.WriteString("add chain ip kube-proxy services\n")
	b.WriteString("add set ip kube-proxy cluster-ips { type ipv4_addr ; }\n")
	b.WriteString("add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }\n")
	b.WriteString("add chain ip kube-proxy probe\nadd chain ip kube-proxy probe2\n")
	b.WriteString("add rule ip kube-proxy nat-prerouting jump services\n")
	b.WriteString("add rule ip kube-proxy nat-output jump services\n")
	b.WriteString("add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips\n")
	for i := range n {
		c := fmt.Sprintf("svc-%d", i)
		fmt.Fprintf(&b, "add chain ip kube-proxy %s\n", c)
		if rulesPerChain == 0 {
			fmt.Fprintf(&b, "add map ip kube-proxy eps-%d { type integer : ipv4_addr . inet_service ; }\n", i)
			fmt.Fprintf(&b, "add rule ip kube-proxy %s meta l4proto tcp dnat ip addr . port to numgen random mod 10 map @eps-%d\n", c, i)
			for j := range 10 {
				k := i*10 + j
				fmt.Fprintf(&b, "add element ip kube-proxy eps-%d { %d : 10.%d.%d.%d . 8080 }\n", i, j, k>>16, (k>>8)&255, k&255)
			}
		}
		for j := range rulesPerChain {
			k := i*rulesPerChain + j
			pre := ""
			if j < rulesPerChain-1 {
				pre = fmt.Sprintf("numgen random mod %d 0 ", rulesPerChain-j)
			}
			fmt.Fprintf(&b, "add rule ip kube-proxy %s %smeta l4proto tcp dnat to 10.%d.%d.%d:8080\n", c, pre, k>>16, (k>>8)&255, k&255)
		}
		fmt.Fprintf(&b, "add element ip kube-proxy service-ips { 172.%d.%d.%d . tcp . 80 : goto %s }\n", 16+i>>16, (i>>8)&255, i&255, c)
	}
	return b.String()
}

// BenchmarkKernelCostVsChains measures single-operation batches as a function of the
// number of chains reachable from the nat base chains: one sub-benchmark per chain
// shape and count, reporting the time to build the table and each probe's p50/p99.
func BenchmarkKernelCostVsChains(b *testing.B) {
	needRoot(b)
	const reps = 20
	probes := []struct{ name, text string }{
		{"set-element", "add element ip kube-proxy cluster-ips { 192.0.%d.1 }\n"},
		{"data-map-element-delete-add", "delete element ip kube-proxy eps-1 { 3 }\nadd element ip kube-proxy eps-1 { 3 : 10.250.0.%d . 8080 }\n"},
		{"rule-no-verdict-no-dnat", "add rule ip kube-proxy probe ip saddr 10.9.9.%d counter\n"},
		{"flush-chain-dnat-rule", "flush chain ip kube-proxy probe\nadd rule ip kube-proxy probe meta l4proto tcp dnat to 10.251.0.%d:80\n"},
		{"map-element-goto", "add element ip kube-proxy service-ips { 192.1.%d.2 . tcp . 80 : goto probe }\n"},
		{"rule-jump", "add rule ip kube-proxy probe2 ip saddr 10.9.9.%d jump probe\n"},
	}
	for _, shape := range []struct {
		name  string
		rules int
	}{{"dnat-rules-10", 10}, {"map-rule-1", 0}} {
		for _, n := range []int{1000, 5000, 10000, 20000} {
			b.Run(fmt.Sprintf("%s/chains-%d", shape.name, n), func(b *testing.B) {
				text := syntheticTable(n, shape.rules)
				if shape.rules != 0 {
					// eps-1 for the data-map probe.
					text += "add map ip kube-proxy eps-1 { type integer : ipv4_addr . inet_service ; }\nadd element ip kube-proxy eps-1 { 3 : 10.250.0.0 . 8080 }\n"
				}
				for b.Loop() {
					ns := testNetns(b)
					ex, err := New(knftables.IPv4Family, render.TableName, Options{NetNSPath: netnsPath(ns)})
					if err != nil {
						b.Fatal(err)
					}
					start := time.Now()
					if err := ex.apply(context.Background(), oneText(text), true); err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(ms(time.Since(start)), "build-ms")
					for _, p := range probes {
						reportPercentiles(b, p.name, timeApply(b, ex, reps, p.text))
					}
					_, _ = nftIn(ns, "", "delete", "table", "ip", render.TableName)
				}
			})
		}
	}
}

// mapLayout rewrites the policy chains (service-…, local-…) of f that DNAT without
// session affinity into one rule selecting from a per-chain named data map
// "slot : addr . port", so that replacing an endpoint changes map elements only.
func mapLayout(f render.Fragment) render.Fragment {
	out := render.Fragment{Containers: slices.Clone(f.Containers), Elements: slices.Clone(f.Elements)}
	for _, c := range f.Chains {
		if !(strings.HasPrefix(c.Name, "service-") || strings.HasPrefix(c.Name, "local-")) || strings.Contains(c.Rules[0].String(), "goto") {
			out.Chains = append(out.Chains, c)
			continue
		}
		m := "eps-" + c.Name
		var proto nft.Value
		for i, r := range c.Rules {
			for _, s := range r.Stmts {
				switch s := s.(type) {
				case nft.DNAT:
					out.Elements = append(out.Elements, render.Element{Container: m, Key: nft.ElemBuf(nil).Num(uint32(i)).Elem(),
						Value: nft.ElemBuf(nil).Addr(s.To.Addr()).Num(uint32(s.To.Port())).Elem()})
				case nft.Match:
					if s.Keys[0] == nft.L4Proto {
						proto = s.Value
					}
				}
			}
		}
		out.Containers = append(out.Containers, render.Container{Name: m, IsMap: true, Type: &nft.SetType{Key: []nft.DataType{nft.TypeInteger}, Data: []nft.DataType{nft.TypeIPv4Addr, nft.TypeInetService}}})
		out.Chains = append(out.Chains, render.Chain{Name: c.Name, Rules: []render.Rule{{Stmts: []nft.Stmt{
			nft.Match{Keys: []nft.Key{nft.L4Proto}, Value: proto},
			nft.DNATMap{Family: nft.IPv4, Keys: []nft.Key{nft.Numgen(uint32(len(c.Rules)))}, Map: m},
		}}}})
	}
	slices.SortFunc(out.Containers, func(a, b render.Container) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(out.Elements, func(a, b render.Element) int {
		return cmp.Or(strings.Compare(a.Container, b.Container), nft.CompareText(a.Key, b.Key), nft.CompareText(a.Value, b.Value))
	})
	return out
}

// BenchmarkKernelTimingLayouts measures full sync, full resync, one endpoint replaced,
// removed or added and one Service added at 10,000 Services x 10 endpoints for the
// renderer's two endpoint selections (rules per endpoint; Config.EndpointMaps) and for
// a rejected alternative, a named data map per policy chain: one sub-benchmark each.
func BenchmarkKernelTimingLayouts(b *testing.B) {
	needRoot(b)
	identity := func(f render.Fragment) render.Fragment { return f }
	layouts := []struct {
		name         string
		endpointMaps bool
		transform    func(render.Fragment) render.Fragment
	}{
		{"rules-per-endpoint", false, identity},
		{"shared-endpoint-maps", true, identity},
		{"data-map-per-policy-chain", false, mapLayout},
	}
	for _, l := range layouts {
		b.Run(l.name, func(b *testing.B) {
			cfg := testConfig(knftables.IPv4Family)
			cfg.EndpointMaps = l.endpointMaps
			for b.Loop() {
				layoutTiming(b, cfg, l.transform)
			}
		})
	}
}

// layoutTiming is one iteration of BenchmarkKernelTimingLayouts for one layout.
func layoutTiming(b *testing.B, cfg *render.Config, transform func(render.Fragment) render.Fragment) {
	const reps = 20
	views := scaleViews(10000, 10)
	frag := func(v *model.ServicePortView) *render.Fragment {
		f := transform(render.RenderService(cfg, v))
		return &f
	}
	services := make(map[model.ServicePortName]*render.Fragment, len(views))
	for _, v := range views {
		services[v.Name] = frag(v)
	}
	base := render.RenderBase(cfg)
	st := render.NewState(&base, services)
	ns := testNetns(b)
	ex, err := New(cfg.Family, render.TableName, Options{NetNSPath: netnsPath(ns)})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	full := ex.NewTransaction()
	render.WriteFull(full, st)
	start := time.Now()
	if err := ex.Run(ctx, full); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(full.NumOperations()), "full-ops")
	b.ReportMetric(ms(time.Since(start)), "full-ms")
	start = time.Now()
	if err := ex.Run(ctx, full); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(ms(time.Since(start)), "resync-ms")

	measure := func(name string, updates func(i int) map[model.ServicePortName]*render.Fragment) {
		var ds []time.Duration
		ops := 0
		for i := range reps {
			p := st.Plan(nil, updates(i), render.PlanOptions{})
			ops = len(p.Ops)
			start := time.Now()
			if err := ex.RunOps(ctx, slices.Values(p.Ops)); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(start))
			st.Commit(p)
		}
		b.ReportMetric(float64(ops), name+"-ops")
		reportPercentiles(b, name, ds)
	}
	measure("endpoint-replaced", func(i int) map[model.ServicePortName]*render.Fragment {
		orig := views[1001+i]
		eps := append([]*model.Endpoint{ep(fmt.Sprintf("10.250.0.%d", i+1), 8080, false)}, orig.ClusterEndpoints[1:]...)
		return map[model.ServicePortName]*render.Fragment{orig.Name: frag(view(orig.ServicePort, eps...))}
	})
	measure("endpoint-removed", func(i int) map[model.ServicePortName]*render.Fragment {
		orig := views[2001+i]
		return map[model.ServicePortName]*render.Fragment{orig.Name: frag(view(orig.ServicePort, orig.ClusterEndpoints[1:]...))}
	})
	measure("endpoint-added", func(i int) map[model.ServicePortName]*render.Fragment {
		orig := views[3001+i]
		eps := append([]*model.Endpoint{ep(fmt.Sprintf("10.251.0.%d", i+1), 8080, false)}, orig.ClusterEndpoints...)
		return map[model.ServicePortName]*render.Fragment{orig.Name: frag(view(orig.ServicePort, eps...))}
	})
	measure("service-added", func(i int) map[model.ServicePortName]*render.Fragment {
		v := scaleView(20001+i, 10)
		return map[model.ServicePortName]*render.Fragment{v.Name: frag(v)}
	})
}

// BenchmarkKernelCostOfDeletes separates what a delete costs from what validation
// costs, on a small table (1,000 chains of 10 rules): each probe's p50/p99.
func BenchmarkKernelCostOfDeletes(b *testing.B) {
	needRoot(b)
	const reps = 20
	text := syntheticTable(1000, 10) + "add map ip kube-proxy eps-1 { type integer : ipv4_addr . inet_service ; }\n" +
		"add set ip kube-proxy pairs { type ipv4_addr . inet_service ; }\nadd chain ip kube-proxy probe3\n"
	for i := range 2 * reps {
		text += fmt.Sprintf("add element ip kube-proxy eps-1 { %d : 10.250.0.%d . 8080 }\n", i+100, i+1)
		text += fmt.Sprintf("add element ip kube-proxy cluster-ips { 192.2.0.%d }\n", i+1)
		text += fmt.Sprintf("add element ip kube-proxy pairs { 192.2.0.%d . 80 }\n", i+1)
		text += fmt.Sprintf("add rule ip kube-proxy probe3 ip saddr 10.9.8.%d counter\n", i+1)
	}
	probes := []struct{ name, text string }{
		{"add-hash-set-element", "add element ip kube-proxy cluster-ips { 192.3.0.%d }\n"},
		{"delete-hash-set-element", "delete element ip kube-proxy cluster-ips { 192.2.0.%d }\n"},
		{"add-concat-set-element", "add element ip kube-proxy pairs { 192.3.0.%d . 80 }\n"},
		{"delete-concat-set-element", "delete element ip kube-proxy pairs { 192.2.0.%d . 80 }\n"},
		{"add-data-map-element", "add element ip kube-proxy eps-1 { %d : 10.251.0.1 . 8080 }\n"},
		{"delete-data-map-element", "delete element ip kube-proxy eps-1 { 1%02d }\n"},
		{"add-counter-rule", "add rule ip kube-proxy probe ip saddr 10.9.9.%d counter\n"},
		{"flush-chain-of-counter-rules", "flush chain ip kube-proxy probe\nadd rule ip kube-proxy probe ip saddr 10.9.7.%d counter\n"},
		{"flush-empty-chain", "flush chain ip kube-proxy probe2\nadd rule ip kube-proxy probe2 ip saddr 10.9.6.%d counter\nflush chain ip kube-proxy probe2\n"},
	}
	for b.Loop() {
		ns := testNetns(b)
		ex, err := New(knftables.IPv4Family, render.TableName, Options{NetNSPath: netnsPath(ns)})
		if err != nil {
			b.Fatal(err)
		}
		if err := ex.apply(context.Background(), oneText(text), true); err != nil {
			b.Fatal(err)
		}
		for _, p := range probes {
			reportPercentiles(b, p.name, timeApply(b, ex, reps, p.text))
		}
	}
}
