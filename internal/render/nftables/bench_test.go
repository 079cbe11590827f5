package nftables

import (
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
)

// BenchmarkRenderFull10k renders 10,000 Services x 10 endpoints and writes the full
// sync transaction (without running it).
func BenchmarkRenderFull10k(b *testing.B) {
	cfg := testConfig(knftables.IPv4Family)
	views := scaleViews(10000, 10)
	fake := knftables.NewFake(cfg.Family, TableName)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		base := RenderBase(cfg)
		st := NewState(&base, renderFragments(cfg, views))
		tx := fake.NewTransaction()
		WriteFull(tx, st)
		b.ReportMetric(float64(tx.NumOperations()), "ops")
	}
}

// BenchmarkDiffOneChange10k re-renders one changed Service (an endpoint replaced) of
// 10,000 and plans the delta, alternating between two versions so every iteration
// has a real change.
func BenchmarkDiffOneChange10k(b *testing.B) {
	cfg := testConfig(knftables.IPv4Family)
	views := scaleViews(10000, 10)
	base := RenderBase(cfg)
	st := NewState(&base, renderFragments(cfg, views))
	fake := knftables.NewFake(cfg.Family, TableName)
	orig := views[4321]
	eps := append([]*model.Endpoint{ep("10.250.0.1", 8080, false)}, orig.ClusterEndpoints[1:]...)
	changed := view(orig.ServicePort, eps...)
	versions := []*model.ServicePortView{changed, orig}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		f := RenderService(cfg, versions[i%2])
		i++
		tx := fake.NewTransaction()
		plan := planInto(tx, st, nil, map[model.ServicePortName]*Fragment{orig.Name: &f}, PlanOptions{})
		st.Commit(plan)
		b.ReportMetric(float64(tx.NumOperations()), "ops")
	}
}

// BenchmarkDiffAll10kNoChange is the cost of a caller that re-renders everything and
// lets Plan find that nothing changed.
func BenchmarkDiffAll10kNoChange(b *testing.B) {
	cfg := testConfig(knftables.IPv4Family)
	views := scaleViews(10000, 10)
	base := RenderBase(cfg)
	st := NewState(&base, renderFragments(cfg, views))
	fake := knftables.NewFake(cfg.Family, TableName)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tx := fake.NewTransaction()
		planInto(tx, st, &base, renderFragments(cfg, views), PlanOptions{})
	}
}
