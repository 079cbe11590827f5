package iptables

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/render/rendertest"
)

// The shared test vocabulary (internal/render/rendertest, internal/testing/golden).
var (
	scaleView  = rendertest.ScaleView
	scaleViews = rendertest.ScaleViews
)

type planCase struct {
	name string
	// before and after are the desired states; maxLines bounds the delta's lines
	// ("*table" and "COMMIT" included).
	before, after []*model.ServicePortView
	maxLines      int
	// golden names the expected delta file, for the small cases.
	golden string
}

func planCases() []planCase {
	base := scaleViews(300, 3)
	with := func(mutate func([]*model.ServicePortView) []*model.ServicePortView) []*model.ServicePortView {
		return mutate(slices.Clone(base))
	}
	small := upstreamOverallViews()
	smallWith := func(mutate func([]*model.ServicePortView) []*model.ServicePortView) []*model.ServicePortView {
		return mutate(slices.Clone(small))
	}
	return []planCase{
		{name: "no change", before: base, after: base, maxLines: 0},
		{name: "endpoint replaced", before: small, golden: "diff-endpoint-replaced.iptables", after: smallWith(func(v []*model.ServicePortView) []*model.ServicePortView {
			// ns4/svc4: 10.180.0.4 replaced by 10.180.0.6.
			v[3] = view(v[3].ServicePort, ep("10.180.0.6", 80, false), ep("10.180.0.5", 80, true))
			return v
		}), maxLines: 20},
		{name: "service added", before: small, golden: "diff-service-added.iptables", after: smallWith(func(v []*model.ServicePortView) []*model.ServicePortView {
			sp := svcPort("ns7", "svc7", "p80", v1.ProtocolTCP, "172.30.0.47", 80)
			sp.NodePort = 3007
			return append(v, view(sp, ep("10.180.0.7", 80, false)))
		}), maxLines: 20},
		{name: "service deleted", before: small, golden: "diff-service-deleted.iptables", after: smallWith(func(v []*model.ServicePortView) []*model.ServicePortView {
			// ns5/svc5: LB with source ranges and affinity.
			return slices.Delete(v, 4, 5)
		}), maxLines: 20},
		{name: "service loses its endpoints", before: small, golden: "diff-service-loses-endpoints.iptables", after: smallWith(func(v []*model.ServicePortView) []*model.ServicePortView {
			v[4] = view(v[4].ServicePort)
			return v
		}), maxLines: 25},
		{name: "add one service at scale", before: base, after: with(func(v []*model.ServicePortView) []*model.ServicePortView {
			return append(v, scaleView(1001, 3))
		}), maxLines: 20},
		{name: "change one endpoint at scale", before: base, after: with(func(v []*model.ServicePortView) []*model.ServicePortView {
			old := v[1]
			v[1] = view(old.ServicePort, ep("10.200.0.1", 8080, false), old.ClusterEndpoints[1], old.ClusterEndpoints[2])
			return v
		}), maxLines: 20},
		{name: "delete a nodeport lb affinity service at scale", before: base, after: with(func(v []*model.ServicePortView) []*model.ServicePortView {
			return slices.Delete(v, 0, 1)
		}), maxLines: 40},
		{name: "policy change at scale", before: base, after: with(func(v []*model.ServicePortView) []*model.ServicePortView {
			sp := *v[20].ServicePort
			sp.ExternalPolicyLocal = !sp.ExternalPolicyLocal
			v[20] = view(&sp, v[20].AllReachableEndpoints...)
			return v
		}), maxLines: 60},
		{name: "same rule twice", before: small, after: smallWith(func(v []*model.ServicePortView) []*model.ServicePortView {
			// An external IP equal to the LB VIP: the two DROP entries of
			// KUBE-EXTERNAL-SERVICES are identical, and go one copy at a time.
			sp := *v[1].ServicePort
			sp.ExternalIPs = addrs("1.2.3.4")
			v[1] = view(&sp, v[1].AllReachableEndpoints...)
			return v
		}), maxLines: 20},
	}
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

// TestPlanMatchesFullRender applies full(before) then Plan(before -> after) to the
// Fake: the result must be what the State says, and equal a full render of after up
// to the order of the shared chains' entries.
func TestPlanMatchesFullRender(t *testing.T) {
	for _, family := range []v1.IPFamily{v1.IPv4Protocol} {
		cfg := testConfig(family)
		for _, tc := range planCases() {
			t.Run(tc.name, func(t *testing.T) {
				want, wantState := programFull(t, cfg, tc.after...)
				fake, st := programFull(t, cfg, tc.before...)
				var buf bytes.Buffer
				plan := st.Plan(&buf, nil, updatesBetween(st, RenderServices(cfg, tc.after)))
				if tc.golden != "" {
					checkGolden(t, tc.golden, buf.String())
				}
				if n := strings.Count(buf.String(), "\n"); n > tc.maxLines {
					t.Errorf("delta has %d lines, want at most %d:\n%s", n, tc.maxLines, buf.String())
				}
				if buf.Len() > 0 {
					if err := fake.Restore(context.Background(), buf.Bytes()); err != nil {
						t.Fatalf("delta failed: %v\n%s", err, buf.String())
					}
				}
				st.Commit(plan)
				if diff := cmp.Diff(st.Dump(), fakeDump(fake)); diff != "" {
					t.Errorf("restored rules differ from the committed State (-state +restored):\n%s", diff)
				}
				if diff := cmp.Diff(sortedEntries(fakeDump(want)), sortedEntries(fakeDump(fake))); diff != "" {
					t.Errorf("old + delta differs from a full render of new (-want +got):\n%s", diff)
				}
				for _, table := range tables {
					if st.Rules(table) != wantState.Rules(table) {
						t.Errorf("%s: committed state counts %d rules, full render %d", table, st.Rules(table), wantState.Rules(table))
					}
				}
				// The committed state must plan nothing against the new one.
				buf.Reset()
				st.Plan(&buf, nil, updatesBetween(st, wantState.services))
				if buf.Len() != 0 {
					t.Errorf("committed state is not the new state; replanning gives:\n%s", buf.String())
				}
			})
		}
	}
}

// TestFullSyncRemovesStaleChains: a full sync over a partial state, given the chains
// the table holds, deletes the per-ServicePort chains nothing renders any more and
// leaves other software's chains alone.
func TestFullSyncRemovesStaleChains(t *testing.T) {
	cfg := testConfig(v1.IPv4Protocol)
	fake, _ := programFull(t, cfg, upstreamOverallViews()...)
	foreign := "*nat\n:CNI-HOSTPORT-DNAT - [0:0]\n-A CNI-HOSTPORT-DNAT -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.1.1.1:80\nCOMMIT\n"
	if err := fake.Restore(context.Background(), []byte(foreign)); err != nil {
		t.Fatal(err)
	}
	after := upstreamOverallViews()[:2]
	var save bytes.Buffer
	if err := fake.SaveInto(context.Background(), iptables.TableNAT, &save); err != nil {
		t.Fatal(err)
	}
	st := renderAll(cfg, after...)
	var buf bytes.Buffer
	w := WriteFull(&buf, st, savedChains(save.Bytes()))
	if err := fake.Restore(context.Background(), buf.Bytes()); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	want, _ := programFull(t, cfg, after...)
	if diff := cmp.Diff(fakeDump(want), fakeDump(fake)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if w.DeletedChains != 11 {
		t.Errorf("deleted %d chains, want 11", w.DeletedChains)
	}
	if !fake.HasChain(iptables.TableNAT, "CNI-HOSTPORT-DNAT") {
		t.Error("a foreign chain was deleted")
	}
}

// TestPlanBaseChange: a new NodePort address changes the tail of nat KUBE-SERVICES;
// it stays after the entries.
func TestPlanBaseChange(t *testing.T) {
	cfg := testConfig(v1.IPv4Protocol)
	views := scaleViews(20, 2)
	fake, st := programFull(t, cfg, views...)
	for i, change := range []func(*Config){
		func(c *Config) { c.NodePortAddresses.IPs = addrs("192.168.0.2", "192.168.1.2") },
		func(c *Config) { c.NodePortAddresses = model.NodePortAddresses{All: true} },
		func(c *Config) { c.TCPBeLiberal = true },
	} {
		change(cfg)
		base := RenderBase(cfg)
		var buf bytes.Buffer
		plan := st.Plan(&buf, &base, nil)
		if err := fake.Restore(context.Background(), buf.Bytes()); err != nil {
			t.Fatalf("change %d: %v\n%s", i, err, buf.String())
		}
		st.Commit(plan)
		want, _ := programFull(t, cfg, views...)
		if diff := cmp.Diff(fakeDump(want), fakeDump(fake)); diff != "" {
			t.Errorf("change %d: (-want +got):\n%s", i, diff)
		}
		if diff := cmp.Diff(st.Dump(), fakeDump(fake)); diff != "" {
			t.Errorf("change %d: state differs (-state +restored):\n%s", i, diff)
		}
	}
}

// TestPlanPartialThenFullOrder: entries inserted by partial syncs sit at the top of
// the shared chains; the State knows where, so "-D" of them works later.
func TestPlanInsertedThenDeleted(t *testing.T) {
	cfg := testConfig(v1.IPv4Protocol)
	views := upstreamOverallViews()
	fake, st := programFull(t, cfg, views[:3]...)
	apply := func(updates map[model.ServicePortName]*Fragment) {
		t.Helper()
		var buf bytes.Buffer
		plan := st.Plan(&buf, nil, updates)
		if err := fake.Restore(context.Background(), buf.Bytes()); err != nil {
			t.Fatalf("%v\n%s", err, buf.String())
		}
		st.Commit(plan)
		if diff := cmp.Diff(st.Dump(), fakeDump(fake)); diff != "" {
			t.Fatalf("(-state +restored):\n%s", diff)
		}
	}
	frag := func(v *model.ServicePortView) *Fragment { f := RenderService(cfg, v); return &f }
	apply(map[model.ServicePortName]*Fragment{views[3].Name: frag(views[3])})
	apply(map[model.ServicePortName]*Fragment{views[4].Name: frag(views[4]), views[5].Name: frag(views[5])})
	apply(map[model.ServicePortName]*Fragment{views[3].Name: nil, views[0].Name: nil})
	apply(map[model.ServicePortName]*Fragment{views[0].Name: frag(views[0])})
}
