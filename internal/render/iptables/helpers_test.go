package iptables

import (
	"bytes"
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/render/rendertest"
	"github.com/kproxy/kproxy/internal/testing/golden"
)

// The shared test vocabulary (internal/render/rendertest, internal/testing/golden).
var (
	addrs       = rendertest.Addrs
	prefixes    = rendertest.Prefixes
	svcPort     = rendertest.ServicePort
	ep          = rendertest.Endpoint
	terminating = rendertest.Terminating
	view        = rendertest.View
	checkGolden = golden.Check
)

func goldenName(s string) string { return golden.Name(s, ".iptables") }

func testConfig(family v1.IPFamily) *Config {
	if family == v1.IPv6Protocol {
		return &Config{
			Family:            family,
			NodePortAddresses: model.NodePortAddresses{IPs: []netip.Addr{netip.MustParseAddr("fd00::2")}},
			LocalDetector:     model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("fd10::/64")}},
			MasqueradeBit:     14,
			NodeIP:            netip.MustParseAddr("fd00::2"),
		}
	}
	return &Config{
		Family: family,
		// Loopback is skipped without localhost NodePorts.
		NodePortAddresses: model.NodePortAddresses{IPs: []netip.Addr{netip.MustParseAddr("192.168.0.2"), netip.MustParseAddr("127.0.0.1")}},
		LocalDetector:     model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
		MasqueradeBit:     14,
		NodeIP:            netip.MustParseAddr("192.168.0.2"),
	}
}

func renderAll(cfg *Config, views ...*model.ServicePortView) *State {
	base := RenderBase(cfg)
	return NewState(&base, RenderServices(cfg, views))
}

// fullInput renders views and returns the full-sync restore input and its State.
func fullInput(cfg *Config, views ...*model.ServicePortView) (string, *State) {
	st := renderAll(cfg, views...)
	var buf bytes.Buffer
	WriteFull(&buf, st, nil)
	return buf.String(), st
}

// programFull writes a full sync into a new iptables Fake.
func programFull(t testing.TB, cfg *Config, views ...*model.ServicePortView) (*iptables.Fake, *State) {
	t.Helper()
	fake := iptables.NewFake(cfg.Family)
	input, st := fullInput(cfg, views...)
	if err := fake.Restore(context.Background(), []byte(input)); err != nil {
		t.Fatalf("full sync failed: %v\n%s", err, input)
	}
	return fake, st
}

// ourRules keeps, from iptables-save output of one table, the declarations and
// rules of kproxy's chains (the canary's left out), as State.Dump prints them.
func ourRules(save string) string { return rendertest.KubeChains(save, ChainCanary) }

// fakeDump is the Fake's content limited to kproxy's chains, in State.Dump form.
func fakeDump(fake *iptables.Fake) string {
	return ourRules(fake.Dump(iptables.TableFilter)) + ourRules(fake.Dump(iptables.TableNAT))
}

// sortedEntries sorts the rules of the shared chains of a dump (partial syncs
// insert entries at the top; their order has no meaning) except the tail rules
// jumping to KUBE-NODEPORTS, which must stay last.
func sortedEntries(dump string) string {
	lines := strings.Split(dump, "\n")
	start := -1
	flush := func(end int) {
		if start >= 0 {
			slices.Sort(lines[start:end])
		}
		start = -1
	}
	for i, l := range lines {
		chain, rest, _ := strings.Cut(strings.TrimPrefix(l, "-A "), " ")
		shared := strings.HasPrefix(l, "-A ") && (chain == ChainServices || chain == ChainNodePorts ||
			chain == ChainExternalServices || chain == ChainProxyFirewall) && !strings.HasSuffix(rest, "-j "+ChainNodePorts)
		if !shared || (start >= 0 && !strings.HasPrefix(lines[start], "-A "+chain+" ")) {
			flush(i)
		}
		if shared && start < 0 {
			start = i
		}
	}
	flush(len(lines))
	return strings.Join(lines, "\n")
}

func iptablesTable(t Table) iptables.Table { return iptables.Table(t) }

func iptablesChain(c string) iptables.Chain { return iptables.Chain(c) }

// savedChains is the names of the chains declared in iptables-save output, as the
// proxier passes them to WriteFull.
func savedChains(save []byte) []string {
	var out []string
	for _, c := range iptables.ChainsInSave(save) {
		out = append(out, string(c))
	}
	return out
}
