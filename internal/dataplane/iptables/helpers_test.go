package iptables

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/dataplane/dptest"
	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/metrics"
	"github.com/kproxy/kproxy/internal/model"
	render "github.com/kproxy/kproxy/internal/render/iptables"
)

const (
	testNodeName = dptest.NodeName
	testNodeIP   = dptest.NodeIP
)

var errInjected = errors.New("injected iptables-restore failure")

// fixture is a Proxier for IPv4 with every dependency faked.
type fixture struct {
	*dptest.Parts
	t       *testing.T
	proxier *Proxier
	ipt     *iptables.Fake
}

func testRenderConfig() render.Config {
	return render.Config{
		Family:            v1.IPv4Protocol,
		NodePortAddresses: model.NodePortAddresses{IPs: []netip.Addr{netip.MustParseAddr(testNodeIP)}},
		LocalDetector:     model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
		MasqueradeBit:     14,
		NodeIP:            netip.MustParseAddr(testNodeIP),
	}
}

func newFixture(t *testing.T, mutate ...func(*Config)) *fixture {
	t.Helper()
	f := &fixture{t: t, Parts: dptest.NewParts(t, metrics.ModeIPTables, testNodeName), ipt: iptables.NewFake(v1.IPv4Protocol)}
	cfg := Config{Config: f.CoreConfig(), Render: testRenderConfig(), IPT: f.ipt}
	for _, mut := range mutate {
		mut(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.proxier = p
	return f
}

func (f *fixture) sync() {
	f.t.Helper()
	if _, err := f.proxier.Sync(context.Background()); err != nil {
		f.t.Fatalf("Sync: %v", err)
	}
}

// restores returns the number of restores run so far.
func (f *fixture) restores() int { return len(f.ipt.Restores()) }

// lastRestore returns the input of the last restore ("" when none).
func (f *fixture) lastRestore() string {
	all := f.ipt.Restores()
	if len(all) == 0 {
		return ""
	}
	return all[len(all)-1]
}

// lastWasFull reports whether the last restore was a full sync (it declares, hence
// flushes, the shared chains).
func (f *fixture) lastWasFull() bool {
	return strings.Contains(f.lastRestore(), ":KUBE-SERVICES - [0:0]")
}

// ours is what the Fake holds of kproxy's chains (and the jumps to them), with the
// entries of the shared chains sorted: partial syncs insert them at the top, and
// their order has no meaning. The tail rules (jumps to KUBE-NODEPORTS) stay last.
func ours(fake *iptables.Fake) string {
	shared := map[string]bool{render.ChainServices: true, render.ChainNodePorts: true,
		render.ChainExternalServices: true, render.ChainProxyFirewall: true}
	var out []string
	for _, table := range []iptables.Table{iptables.TableFilter, iptables.TableNAT} {
		for _, line := range strings.Split(fake.Dump(table), "\n") {
			if strings.HasPrefix(line, ":KUBE-") && !strings.HasPrefix(line, ":"+render.ChainCanary+" ") {
				out = append(out, line)
			}
		}
		for _, chain := range fake.Chains(table) {
			rules := fake.Rules(table, chain)
			if shared[string(chain)] {
				var entries, tails []string
				for _, r := range rules {
					if strings.HasSuffix(r, "-j "+render.ChainNodePorts) {
						tails = append(tails, r)
					} else {
						entries = append(entries, r)
					}
				}
				slices.Sort(entries)
				rules = append(entries, tails...)
			}
			for _, r := range rules {
				out = append(out, "-A "+string(chain)+" "+r)
			}
		}
	}
	return strings.Join(out, "\n")
}

// expected programs the model from scratch with cfg into a fresh Fake, as a full
// sync of a new proxier would.
func (f *fixture) expected(cfg render.Config) string {
	f.t.Helper()
	fresh := iptables.NewFake(v1.IPv4Protocol)
	ctx := context.Background()
	for _, j := range render.JumpRules() {
		if _, err := fresh.EnsureChain(ctx, iptables.Table(j.Table), iptables.Chain(j.Target)); err != nil {
			f.t.Fatal(err)
		}
		if _, err := fresh.EnsureRule(ctx, true, iptables.Table(j.Table), iptables.Chain(j.Chain), j.Args...); err != nil {
			f.t.Fatal(err)
		}
	}
	base := render.RenderBase(&cfg)
	st := render.NewState(&base, render.RenderServices(&cfg, slices.Collect(f.State.Views())))
	var buf bytes.Buffer
	render.WriteFull(&buf, st, nil)
	if err := fresh.Restore(ctx, buf.Bytes()); err != nil {
		f.t.Fatalf("fresh full render: %v", err)
	}
	return ours(fresh)
}

// checkRulesAreFullRender fails unless the Fake holds a fresh full render.
func (f *fixture) checkRulesAreFullRender(cfg render.Config) {
	f.t.Helper()
	if diff := cmp.Diff(f.expected(cfg), ours(f.ipt)); diff != "" {
		f.t.Errorf("rules differ from a full render (-want +got):\n%s", diff)
	}
}

// Metric readers.

// metricValue returns the value of the counter or gauge name with the given labels
// (0 when the series does not exist).
func (f *fixture) metricValue(name string, labels map[string]string) float64 {
	return dptest.Value(f.t, f.Registry, name, labels)
}

// histogram returns the sample count of a histogram series.
func (f *fixture) histogram(name string, labels map[string]string) uint64 {
	n, _ := dptest.Histogram(f.t, f.Registry, name, labels)
	return n
}

func tableLabel(table string) map[string]string {
	return map[string]string{"ip_family": "IPv4", "table": table}
}

// API object builders.
