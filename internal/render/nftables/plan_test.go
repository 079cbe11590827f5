package nftables

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/render/rendertest"
)

// The shared test vocabulary (internal/render/rendertest, internal/testing/golden).
var (
	scaleView  = rendertest.ScaleView
	scaleViews = rendertest.ScaleViews
)

// canonicalDump is fake.Dump() with element lines sorted: the Fake keeps elements in
// insertion order, which a delta legitimately changes.
func canonicalDump(fake *knftables.Fake) string {
	var other, elements []string
	for _, l := range strings.Split(fake.Dump(), "\n") {
		if strings.HasPrefix(l, "add element ") {
			elements = append(elements, l)
		} else if l != "" {
			other = append(other, l)
		}
	}
	slices.Sort(elements)
	return strings.Join(append(other, elements...), "\n")
}

type planCase struct {
	name string
	// before and after are the desired states; want bounds the delta's operations.
	before, after []*model.ServicePortView
	maxOps        int
	// maxOpsMaps bounds it with Config.EndpointMaps (0: same as maxOps).
	maxOpsMaps int
	// deferToo also runs the case with PlanOptions.DeferChainDeletes (cases that
	// delete chains).
	deferToo bool
}

func planCases() []planCase {
	base := scaleViews(1000, 3)
	with := func(mutate func([]*model.ServicePortView) []*model.ServicePortView) []*model.ServicePortView {
		return mutate(slices.Clone(base))
	}
	return []planCase{
		{name: "no change", before: base, after: base, maxOps: 0},
		{name: "add one service", before: base, after: with(func(v []*model.ServicePortView) []*model.ServicePortView {
			return append(v, scaleView(1001, 3))
		}), maxOps: 6, // chain, 3 rules (one per endpoint), cluster-ips and service-ips elements
			maxOpsMaps: 8}, // chain, its rule, 3 endpoint-map elements, cluster-ips and service-ips elements (+ the endpoint map if its shard was unused)
		{name: "change one endpoint", before: base, after: with(func(v []*model.ServicePortView) []*model.ServicePortView {
			old := v[1]
			v[1] = view(old.ServicePort, ep("10.200.0.1", 8080, false), old.ClusterEndpoints[1], old.ClusterEndpoints[2])
			return v
		}), maxOps: 4, // flush + 3 rules
			maxOpsMaps: 6}, // endpoint-map elements only: the new endpoint sorts last, so 3 slots change (delete + add)
		{name: "delete a service", before: base, after: with(func(v []*model.ServicePortView) []*model.ServicePortView {
			return slices.Delete(v, 1, 2)
		}), maxOps: 4, deferToo: true, // 2 elements, flush + delete chain
			maxOpsMaps: 7}, // cluster-ips, service-ips and 3 endpoint-map elements, flush + delete chain
		{name: "delete a nodeport lb affinity service", before: base, after: with(func(v []*model.ServicePortView) []*model.ServicePortView {
			return slices.Delete(v, 0, 1)
		}), maxOps: 40, deferToo: true},
		{name: "service loses all endpoints", before: base, after: with(func(v []*model.ServicePortView) []*model.ServicePortView {
			v[4] = view(v[4].ServicePort)
			return v
		}), maxOps: 20},
		{name: "affinity timeout changes", before: base, after: with(func(v []*model.ServicePortView) []*model.ServicePortView {
			sp := *v[50].ServicePort
			sp.StickyMaxAgeSeconds = 60
			v[50] = view(&sp, v[50].ClusterEndpoints...)
			return v
		}), maxOps: 40, deferToo: true},
		{name: "last users of an endpoint map deleted", before: base, after: with(func(v []*model.ServicePortView) []*model.ServicePortView {
			// Every Service of service 1's shard goes: the shared endpoint maps of
			// that shard go with the last one, not before.
			shard := endpointShard(&v[1].Name)
			return slices.DeleteFunc(v, func(sv *model.ServicePortView) bool { return endpointShard(&sv.Name) == shard })
		}), maxOps: 200, deferToo: true},
		{name: "shared hairpin and clusterIP", before: base, after: with(func(v []*model.ServicePortView) []*model.ServicePortView {
			// A second port of service 3 sharing its ClusterIP and local endpoint.
			sp := *v[3].ServicePort
			sp.Name.Port, sp.Port = "p81", 81
			return append(v, view(&sp, v[3].ClusterEndpoints...))
		}), maxOps: 5, // chain, 3 rules, service-ips element
			maxOpsMaps: 6}, // chain, its rule, service-ips element, 3 endpoint-map elements
	}
}

func renderFragments(cfg *Config, views []*model.ServicePortView) map[model.ServicePortName]*Fragment {
	return RenderServices(cfg, views)
}

// updatesBetween re-renders everything and passes only fragments that differ, as a
// caller that tracks changed Services would.
func updatesBetween(st *State, want map[model.ServicePortName]*Fragment) map[model.ServicePortName]*Fragment {
	updates := map[model.ServicePortName]*Fragment{}
	for n, f := range want {
		if old := st.Service(n); old == nil || !old.Equal(f) {
			updates[n] = f
		}
	}
	for n := range st.services {
		if want[n] == nil {
			updates[n] = nil
		}
	}
	return updates
}

func TestPlanMatchesFullRender(t *testing.T) {
	for _, endpointMaps := range []bool{false, true} {
		cfg := testConfig(knftables.IPv4Family)
		cfg.EndpointMaps = endpointMaps
		for _, tc := range planCases() {
			planMatchesFullRender(t, cfg, tc)
		}
	}
}

func planMatchesFullRender(t *testing.T, cfg *Config, tc planCase) {
	{
		// The Fake stores elements in a list: a full sync of 1000 Services is slow
		// there, so render the expected state once per case.
		want, wantState := programFull(t, cfg, tc.after...)
		wantDump := canonicalDump(want)
		for _, deferDeletes := range []bool{false, true} {
			if deferDeletes && !tc.deferToo {
				continue
			}
			t.Run(fmt.Sprintf("endpointMaps=%v/%s/defer=%v", cfg.EndpointMaps, tc.name, deferDeletes), func(t *testing.T) {
				fake, st := programFull(t, cfg, tc.before...)
				base := RenderBase(cfg)
				tx := fake.NewTransaction()
				plan := planInto(tx, st, &base, updatesBetween(st, renderFragments(cfg, tc.after)), PlanOptions{DeferChainDeletes: deferDeletes})
				maxOps := tc.maxOps
				if cfg.EndpointMaps && tc.maxOpsMaps != 0 {
					maxOps = tc.maxOpsMaps
				}
				if n := tx.NumOperations(); n > maxOps {
					t.Errorf("delta has %d operations, want at most %d:\n%s", n, maxOps, tx.String())
				}
				if err := fake.Run(context.Background(), tx); err != nil {
					t.Fatalf("delta failed: %v\n%s", err, tx.String())
				}
				st.Commit(plan)
				if len(plan.StaleChains) > 0 {
					tx := fake.NewTransaction()
					deleteStaleInto(tx, st, plan.StaleChains)
					if err := fake.Run(context.Background(), tx); err != nil {
						t.Fatalf("deleting stale chains: %v", err)
					}
				}

				if diff := cmp.Diff(wantDump, canonicalDump(fake)); diff != "" {
					t.Errorf("old + delta differs from a full render of new (-want +got):\n%s", diff)
				}
				// The committed state must plan nothing against a fresh one.
				tx = fake.NewTransaction()
				planInto(tx, st, wantState.Base(), updatesBetween(st, wantState.services), PlanOptions{})
				if tx.NumOperations() != 0 {
					t.Errorf("committed state is not the new state; replanning gives:\n%s", tx.String())
				}
			})
		}
	}
}

func TestPlanBaseChange(t *testing.T) {
	cfg := testConfig(knftables.IPv4Family)
	views := scaleViews(20, 2)
	fake, st := programFull(t, cfg, views...)

	changes := []func(*Config){
		func(c *Config) { c.NodePortAddresses = model.NodePortAddresses{All: true} },
		func(c *Config) { c.MasqueradeAll = true },
		func(c *Config) { c.NodePortAddresses = model.NodePortAddresses{IPs: addrs("192.168.0.3")} },
		func(c *Config) {
			c.LocalDetector = model.LocalDetector{Mode: model.DetectInterfaceNamePrefix, InterfaceNamePrefix: "veth"}
		},
	}
	for i, change := range changes {
		change(cfg)
		base := RenderBase(cfg)
		all := renderFragments(cfg, views)
		tx := fake.NewTransaction()
		plan := planInto(tx, st, &base, updatesBetween(st, all), PlanOptions{})
		if err := fake.Run(context.Background(), tx); err != nil {
			t.Fatalf("change %d: delta failed: %v\n%s", i, err, tx.String())
		}
		st.Commit(plan)
		want, _ := programFull(t, cfg, views...)
		if diff := cmp.Diff(canonicalDump(want), canonicalDump(fake)); diff != "" {
			t.Errorf("change %d: old + delta differs from a full render (-want +got):\n%s", i, diff)
		}
	}
}

// TestWriteFullReplacesForeignContent checks the drop-in takeover: whatever the table
// held (here: leftovers of another ruleset) is gone after one full sync.
func TestWriteFullReplacesForeignContent(t *testing.T) {
	cfg := testConfig(knftables.IPv4Family)
	fake := knftables.NewFake(cfg.Family, TableName)
	tx := fake.NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Add(&knftables.Chain{Name: "endpoint-OLD-ns/svc/tcp/p80__10.0.0.1/80"})
	tx.Add(&knftables.Chain{Name: chainNATPrerouting, Type: knftables.PtrTo(knftables.NATType), Hook: knftables.PtrTo(knftables.PreroutingHook), Priority: knftables.PtrTo(knftables.BaseChainPriority("-50"))})
	tx.Add(&knftables.Map{Name: "localhost-nodeport-reject-ports", Type: "inet_proto . inet_service : verdict"})
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	st := renderAll(cfg, scaleViews(3, 2)...)
	tx = fake.NewTransaction()
	WriteFull(tx, st)
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	want, _ := programFull(t, cfg, scaleViews(3, 2)...)
	if diff := cmp.Diff(want.Dump(), fake.Dump()); diff != "" {
		t.Errorf("takeover left foreign content (-want +got):\n%s", diff)
	}
}

// applyPlan plans updates against st, runs the delta on fake and commits it.
func applyPlan(t *testing.T, fake *knftables.Fake, st *State, updates map[model.ServicePortName]*Fragment, opts PlanOptions) *Plan {
	t.Helper()
	tx := fake.NewTransaction()
	plan := planInto(tx, st, nil, updates, opts)
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatalf("delta failed: %v\n%s", err, tx.String())
	}
	st.Commit(plan)
	return plan
}

func TestDeferredChainComesBack(t *testing.T) {
	cfg := testConfig(knftables.IPv4Family)
	views := scaleViews(5, 2)
	fake, st := programFull(t, cfg, views...)
	name := views[1].Name
	frag := st.Service(name)

	plan := applyPlan(t, fake, st, map[model.ServicePortName]*Fragment{name: nil}, PlanOptions{DeferChainDeletes: true})
	if len(plan.StaleChains) == 0 {
		t.Fatal("expected stale chains")
	}
	// The Service comes back before the stale chains are deleted.
	applyPlan(t, fake, st, map[model.ServicePortName]*Fragment{name: frag}, PlanOptions{DeferChainDeletes: true})
	tx := fake.NewTransaction()
	if n := deleteStaleInto(tx, st, plan.StaleChains); n != 0 {
		t.Errorf("deleted %d chains that are in use again", n)
	}
	want, _ := programFull(t, cfg, views...)
	if diff := cmp.Diff(canonicalDump(want), canonicalDump(fake)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestConflictingElements: two Services claim the same externalIP:port. The kernel
// holds one; when its owner goes, the other's takes over.
func TestConflictingElements(t *testing.T) {
	cfg := testConfig(knftables.IPv4Family)
	a := svcPort("ns1", "a", "p80", v1.ProtocolTCP, "172.30.0.41", 80)
	a.ExternalIPs = addrs("192.168.99.1")
	b := svcPort("ns1", "b", "p80", v1.ProtocolTCP, "172.30.0.42", 80)
	b.ExternalIPs = addrs("192.168.99.1")
	va, vb := view(a, ep("10.180.0.1", 80, false)), view(b, ep("10.180.0.2", 80, false))
	fake, st := programFull(t, cfg, va, vb)

	applyPlan(t, fake, st, map[model.ServicePortName]*Fragment{va.Name: nil}, PlanOptions{})
	want, _ := programFull(t, cfg, vb)
	if diff := cmp.Diff(canonicalDump(want), canonicalDump(fake)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	applyPlan(t, fake, st, map[model.ServicePortName]*Fragment{vb.Name: nil}, PlanOptions{})
	want, _ = programFull(t, cfg)
	if diff := cmp.Diff(canonicalDump(want), canonicalDump(fake)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestNamesStayValid(t *testing.T) {
	long := strings.Repeat("a", 63)
	name := model.ServicePortName{Port: long, Protocol: v1.ProtocolSCTP}
	name.Namespace, name.Name = long, long
	ap := netip.MustParseAddrPort("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535")
	names := namesFor(&name)
	for _, n := range []string{names.clusterPolicy, names.localPolicy, names.external, names.firewall,
		prefixEndpoint + endpointNameBase(&name, ap), affinitySetName(&name, ap, 10800)} {
		if len(n) > knftables.NameLengthMax {
			t.Errorf("name too long (%d): %s", len(n), n)
		}
		for _, r := range n {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./-", r)) {
				t.Errorf("invalid character %q in %s", r, n)
			}
		}
	}
	other := name
	other.Port = long[:62] + "b"
	if serviceNameBase(&name) == serviceNameBase(&other) {
		t.Error("names differing in one character collide")
	}
}
