package nftnetlink

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/nft"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// step returns the operations of one transaction from the applied state; commit
// runs after it succeeded.
type step struct {
	name  string
	write func() (ops []nft.Op, commit func())
}

// deltaSteps are the renderer's plan scenarios (plan_test.go planCases) on a
// synthetic cluster of n Services x 3 endpoints, chained on one table.
func deltaSteps(cfg *render.Config, n int) []step {
	steps, _ := deltaStepsOn(cfg, n)
	return steps
}

// deltaStepsOn is deltaSteps, with the state they apply to and commit into.
func deltaStepsOn(cfg *render.Config, n int) ([]step, *render.State) {
	views := scaleViews(n, 3)
	st := renderState(cfg, views)
	var stale []string
	delta := func(name string, opts render.PlanOptions, updates func() map[model.ServicePortName]*render.Fragment) step {
		return step{name, func() ([]nft.Op, func()) {
			p := st.Plan(nil, updates(), opts)
			return p.Ops, func() { st.Commit(p); stale = append(stale, p.StaleChains...) }
		}}
	}
	one := func(v *model.ServicePortView) map[model.ServicePortName]*render.Fragment {
		return map[model.ServicePortName]*render.Fragment{v.Name: fragment(cfg, v)}
	}
	deleted := func(v *model.ServicePortView) map[model.ServicePortName]*render.Fragment {
		return map[model.ServicePortName]*render.Fragment{v.Name: nil}
	}
	return []step{
		{"full sync", func() ([]nft.Op, func()) { return slices.Collect(render.FullOps(st)), func() {} }},
		delta("add one service", render.PlanOptions{}, func() map[model.ServicePortName]*render.Fragment {
			return one(scaleView(n+1, 3))
		}),
		delta("change one endpoint", render.PlanOptions{}, func() map[model.ServicePortName]*render.Fragment {
			old := views[1]
			return one(view(old.ServicePort, ep("10.200.0.1", 8080, false), old.ClusterEndpoints[1], old.ClusterEndpoints[2]))
		}),
		delta("delete a service", render.PlanOptions{}, func() map[model.ServicePortName]*render.Fragment { return deleted(views[2]) }),
		delta("delete a nodeport lb affinity service (deferred chain deletes)", render.PlanOptions{DeferChainDeletes: true},
			func() map[model.ServicePortName]*render.Fragment { return deleted(views[0]) }),
		{"delete stale chains", func() ([]nft.Op, func()) {
			return st.DeleteStaleChains(stale), func() { stale = nil }
		}},
		delta("delete a nodeport lb affinity service", render.PlanOptions{}, func() map[model.ServicePortName]*render.Fragment {
			return deleted(views[100])
		}),
		delta("service loses all endpoints", render.PlanOptions{}, func() map[model.ServicePortName]*render.Fragment {
			return one(view(views[4].ServicePort))
		}),
		delta("affinity timeout changes", render.PlanOptions{}, func() map[model.ServicePortName]*render.Fragment {
			sp := *views[50].ServicePort
			sp.StickyMaxAgeSeconds = 60
			return one(view(&sp, views[50].ClusterEndpoints...))
		}),
		delta("shared hairpin and clusterIP", render.PlanOptions{}, func() map[model.ServicePortName]*render.Fragment {
			sp := *views[3].ServicePort
			sp.Name.Port, sp.Port = "p81", 81
			return one(view(&sp, views[3].ClusterEndpoints...))
		}),
		delta("many endpoints (numgen map)", render.PlanOptions{}, func() map[model.ServicePortName]*render.Fragment {
			return one(scaleView(5, 40))
		}),
		{"full sync again", func() ([]nft.Op, func()) { return slices.Collect(render.FullOps(st)), func() {} }},
	}, st
}

// TestEquivalentToNftDeltas runs each step's transaction both through nft, as
// printed (one namespace), and the executor's RunOps (another), the daemon's two
// writers, and compares the listings after each.
func TestEquivalentToNftDeltas(t *testing.T) {
	needRoot(t)
	cfg := testConfig(knftables.IPv4Family)
	runSteps(t, cfg.Family, deltaSteps(cfg, 200))
}

func runSteps(t *testing.T, family knftables.Family, steps []step) {
	t.Helper()
	nsNft, nsNl := testNetns(t), testNetns(t)
	ex, err := New(family, render.TableName, Options{NetNSPath: netnsPath(nsNl)})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		ops, commit := s.write()
		text := nft.AppendScript(nil, slices.Values(ops), ex.nftFamily(), render.TableName)
		if out, err := nftIn(nsNft, string(text)); err != nil {
			t.Fatalf("%s: nft -f: %v\n%s", s.name, err, out)
		}
		if err := ex.RunOps(context.Background(), slices.Values(ops)); err != nil {
			t.Fatalf("%s: netlink: %v", s.name, err)
		}
		commit()
		want, got := listTable(t, nsNft, family, render.TableName), listTable(t, nsNl, family, render.TableName)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s: listing differs (-nft +netlink):\n%s", s.name, diff)
		}
		t.Logf("%s: %d operations, listings identical", s.name, len(ops))
	}
}
