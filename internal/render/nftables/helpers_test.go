package nftables

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/nft"
	"github.com/kproxy/kproxy/internal/nft/nfttext"
	"github.com/kproxy/kproxy/internal/render/rendertest"
	"github.com/kproxy/kproxy/internal/testing/golden"
)

// The shared test vocabulary (internal/render/rendertest, internal/testing/golden).
var (
	svcPort     = rendertest.ServicePort
	ep          = rendertest.Endpoint
	terminating = rendertest.Terminating
	view        = rendertest.View
	checkGolden = golden.Check
)

func goldenName(s string) string { return golden.Name(s, ".nft") }

func testConfig(family knftables.Family) *Config {
	if family == knftables.IPv6Family {
		return &Config{
			Family:            family,
			NodePortAddresses: model.NodePortAddresses{IPs: []netip.Addr{netip.MustParseAddr("fd00::2")}},
			LocalDetector:     model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("fd10::/64")}},
			MasqueradeBit:     14,
			ServiceCIDRs:      []netip.Prefix{netip.MustParsePrefix("fd30::/108")},
			NodeIP:            netip.MustParseAddr("fd00::2"),
		}
	}
	return &Config{
		Family:            family,
		NodePortAddresses: model.NodePortAddresses{IPs: []netip.Addr{netip.MustParseAddr("192.168.0.2"), netip.MustParseAddr("127.0.0.1")}},
		LocalDetector:     model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
		MasqueradeBit:     14,
		ServiceCIDRs:      []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16")},
		NodeIP:            netip.MustParseAddr("192.168.0.2"),
	}
}

func renderAll(cfg *Config, views ...*model.ServicePortView) *State {
	base := RenderBase(cfg)
	services := map[model.ServicePortName]*Fragment{}
	for _, v := range views {
		f := RenderService(cfg, v)
		services[v.Name] = &f
	}
	return NewState(&base, services)
}

// programFull renders views, writes a full sync into a new Fake and runs it.
func programFull(t testing.TB, cfg *Config, views ...*model.ServicePortView) (*knftables.Fake, *State) {
	t.Helper()
	fake := knftables.NewFake(cfg.Family, TableName)
	st := renderAll(cfg, views...)
	tx := fake.NewTransaction()
	WriteFull(tx, st)
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatalf("full sync failed: %v\n%s", err, tx.String())
	}
	return fake, st
}

// planInto is st.Plan with its operations added to tx (the knftables writers' way).
func planInto(tx *knftables.Transaction, st *State, base *Fragment, updates map[model.ServicePortName]*Fragment, opts PlanOptions) *Plan {
	plan := st.Plan(base, updates, opts)
	AddOps(tx, slices.Values(plan.Ops))
	return plan
}

// deleteStaleInto adds st.DeleteStaleChains(chains) to tx; it returns how many
// chains it deletes.
func deleteStaleInto(tx *knftables.Transaction, st *State, chains []string) int {
	ops := st.DeleteStaleChains(chains)
	AddOps(tx, slices.Values(ops))
	return len(ops)
}

// elem is the element key or value text reads as.
func elem(text string) nft.Elem {
	e, err := nfttext.ParseElem(text)
	if err != nil {
		panic(err)
	}
	return e
}
