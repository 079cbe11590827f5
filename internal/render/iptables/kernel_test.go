package iptables

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/render/rendertest"
)

// The kernel tests load the rendered restore inputs with the real iptables-restore
// of each backend (nft and legacy) inside network namespaces they create and delete
// (rendertest.Netns), so the machine's own rules are never touched, and check that
// iptables-save prints back exactly what the State says.

type backend string

// kernelBackends returns the iptables backends usable here for family, or skips.
func kernelBackends(t testing.TB, family v1.IPFamily) []backend {
	t.Helper()
	var out []backend
	for _, b := range rendertest.IptablesBackends(t, family) {
		out = append(out, backend(b))
	}
	return out
}

func binary(b backend, family v1.IPFamily, tool string) string {
	return rendertest.IptablesBinary(string(b), family, tool)
}

func newNetns(t testing.TB) string { return rendertest.Netns(t, "iptr") }

var (
	run      = rendertest.RunIn
	numbered = rendertest.Numbered
)

type kernel struct {
	t       testing.TB
	ns      string
	backend backend
	family  v1.IPFamily
}

func newKernel(t testing.TB, b backend, family v1.IPFamily) *kernel {
	return &kernel{t: t, ns: newNetns(t), backend: b, family: family}
}

func (k *kernel) restore(input string) {
	k.t.Helper()
	if _, err := run(k.ns, []byte(input), binary(k.backend, k.family, "-restore"), "-w", "5", "--noflush", "--counters"); err != nil {
		k.t.Fatalf("kernel refused the input: %v\n%s", err, numbered(input))
	}
}

func (k *kernel) save(table Table) string {
	k.t.Helper()
	out, err := run(k.ns, nil, binary(k.backend, k.family, "-save"), "-t", string(table))
	if err != nil {
		k.t.Fatal(err)
	}
	return out
}

// ours is what the kernel holds of kproxy's chains, in State.Dump form.
func (k *kernel) ours() string {
	return ourRules(k.save(TableFilter)) + ourRules(k.save(TableNAT))
}

// TestKernelGoldenRulesets restores every expected full-sync input, twice (a full
// sync over a previous one), and compares iptables-save with the State.
func TestKernelGoldenRulesets(t *testing.T) {
	backends := map[v1.IPFamily][]backend{
		v1.IPv4Protocol: kernelBackends(t, v1.IPv4Protocol),
		v1.IPv6Protocol: kernelBackends(t, v1.IPv6Protocol),
	}
	for _, tc := range renderCases() {
		cfg, views := tc.build()
		if cfg.CountInvalidDrops || cfg.CountLocalhostNodePorts {
			// "-m nfacct" needs the counters to exist; nothing here creates them.
			continue
		}
		for _, b := range backends[cfg.Family] {
			t.Run(string(b)+"/"+tc.name, func(t *testing.T) {
				k := newKernel(t, b, cfg.Family)
				input, st := fullInput(cfg, views...)
				k.restore(input)
				if diff := cmp.Diff(st.Dump(), k.ours()); diff != "" {
					t.Fatalf("iptables-save differs from the State (-state +kernel):\n%s", diff)
				}
				k.restore(input)
				if diff := cmp.Diff(st.Dump(), k.ours()); diff != "" {
					t.Errorf("after a second full sync (-state +kernel):\n%s", diff)
				}
			})
		}
	}
}

// TestKernelPlans restores full(before), then the delta, and compares with the
// committed State; then a full sync of the new state, given the chains the kernel
// holds, must delete the stale ones and give a full render of it.
func TestKernelPlans(t *testing.T) {
	cfg := testConfig(v1.IPv4Protocol)
	for _, b := range kernelBackends(t, cfg.Family) {
		for _, tc := range planCases() {
			t.Run(string(b)+"/"+tc.name, func(t *testing.T) {
				k := newKernel(t, b, cfg.Family)
				full, st := fullInput(cfg, tc.before...)
				k.restore(full)
				var buf bytes.Buffer
				plan := st.Plan(&buf, nil, updatesBetween(st, RenderServices(cfg, tc.after)))
				if buf.Len() > 0 {
					k.restore(buf.String())
				}
				st.Commit(plan)
				if diff := cmp.Diff(st.Dump(), k.ours()); diff != "" {
					t.Fatalf("iptables-save differs from the committed State (-state +kernel):\n%s", diff)
				}

				fresh := renderAll(cfg, tc.after...)
				buf.Reset()
				WriteFull(&buf, fresh, savedChains([]byte(k.save(TableNAT))))
				k.restore(buf.String())
				if diff := cmp.Diff(fresh.Dump(), k.ours()); diff != "" {
					t.Errorf("full sync over the partial state (-want +kernel):\n%s", diff)
				}
			})
		}
	}
}

// TestKernelBaseChange plans tail-rule changes of the shared chains.
func TestKernelBaseChange(t *testing.T) {
	for _, b := range kernelBackends(t, v1.IPv4Protocol) {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(v1.IPv4Protocol)
			k := newKernel(t, b, cfg.Family)
			full, st := fullInput(cfg, scaleViews(10, 2)...)
			k.restore(full)
			cfg.NodePortAddresses.IPs = addrs("192.168.0.2", "192.168.1.2")
			cfg.TCPBeLiberal = true
			base := RenderBase(cfg)
			var buf bytes.Buffer
			plan := st.Plan(&buf, &base, nil)
			k.restore(buf.String())
			st.Commit(plan)
			if diff := cmp.Diff(st.Dump(), k.ours()); diff != "" {
				t.Errorf("(-state +kernel):\n%s", diff)
			}
		})
	}
}

// TestKernelJumpRules inserts the jump rules as the dataplane does (iptables -I
// CHAIN 1 ARGS) and checks that the kernel prints them as the Fake does.
func TestKernelJumpRules(t *testing.T) {
	for _, family := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		for _, b := range kernelBackends(t, family) {
			t.Run(string(b)+"/"+string(family), func(t *testing.T) {
				cfg := testConfig(family)
				k := newKernel(t, b, family)
				full, _ := fullInput(cfg)
				k.restore(full)
				fake, _ := programFull(t, cfg)
				ctx := context.Background()
				for _, j := range JumpRules() {
					if _, err := run(k.ns, nil, binary(b, family, ""), "-w", "5", "-t", string(j.Table), "-N", j.Target); err != nil &&
						!strings.Contains(err.Error(), "exists") {
						t.Fatal(err)
					}
					if _, err := run(k.ns, nil, append([]string{binary(b, family, ""), "-w", "5", "-t", string(j.Table), "-I", j.Chain, "1"}, j.Args...)...); err != nil {
						t.Fatal(err)
					}
					if _, err := run(k.ns, nil, append([]string{binary(b, family, ""), "-w", "5", "-t", string(j.Table), "-C", j.Chain}, j.Args...)...); err != nil {
						t.Errorf("the kernel does not find the rule it was given: %v", err)
					}
					if _, err := fake.EnsureChain(ctx, iptablesTable(j.Table), iptablesChain(j.Target)); err != nil {
						t.Fatal(err)
					}
					if _, err := fake.EnsureRule(ctx, true, iptablesTable(j.Table), iptablesChain(j.Chain), j.Args...); err != nil {
						t.Fatal(err)
					}
				}
				builtin := func(save string) string {
					var out []string
					for _, l := range strings.Split(save, "\n") {
						if strings.HasPrefix(l, "-A ") && !strings.HasPrefix(l, "-A KUBE-") {
							out = append(out, l)
						}
					}
					return strings.Join(out, "\n")
				}
				for _, table := range tables {
					if diff := cmp.Diff(builtin(fake.Dump(iptablesTable(table))), builtin(k.save(table))); diff != "" {
						t.Errorf("%s: (-fake +kernel):\n%s", table, diff)
					}
				}
			})
		}
	}
}

// timingServices is the size of BenchmarkKernelTiming's cluster.
var timingServices = flag.Int("timing-services", 1000, "Services (x 10 endpoints) of BenchmarkKernelTiming")

// BenchmarkKernelTiming times iptables-restore of a full sync of -timing-services
// Services x 10 endpoints and of one-endpoint deltas and a deletion on top, with
// each backend, in a private network namespace: one iteration is the whole
// experiment, reported in ms (the machine's figures, not the code's).
func BenchmarkKernelTiming(b *testing.B) {
	n := *timingServices
	cfg := testConfig(v1.IPv4Protocol)
	for _, be := range kernelBackends(b, cfg.Family) {
		b.Run(string(be), func(b *testing.B) {
			for b.Loop() {
				k := newKernel(b, be, cfg.Family)
				views := scaleViews(n, 10)
				full, st := fullInput(cfg, views...)
				timed := func(input string) float64 {
					start := time.Now()
					k.restore(input)
					return float64(time.Since(start).Microseconds()) / 1000
				}
				b.ReportMetric(timed(full), "full-sync-ms")
				var replaced float64
				for i := range 3 {
					orig := views[(n/2+i)%n]
					eps := append([]*model.Endpoint{ep(fmt.Sprintf("10.250.0.%d", i+1), 8080, false)}, orig.ClusterEndpoints[1:]...)
					f := RenderService(cfg, view(orig.ServicePort, eps...))
					var buf bytes.Buffer
					plan := st.Plan(&buf, nil, map[model.ServicePortName]*Fragment{orig.Name: &f})
					replaced = max(replaced, timed(buf.String()))
					st.Commit(plan)
				}
				b.ReportMetric(replaced, "endpoint-replaced-max-ms")
				var buf bytes.Buffer
				st.Commit(st.Plan(&buf, nil, map[model.ServicePortName]*Fragment{views[0].Name: nil}))
				b.ReportMetric(timed(buf.String()), "service-deleted-ms")
				b.ReportMetric(timed(full), "full-sync-again-ms")
				b.ReportMetric(float64(strings.Count(full, "\n")), "full-sync-lines")
			}
		})
	}
}
