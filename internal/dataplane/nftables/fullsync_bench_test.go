package nftables

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/nftnetlink"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// BenchmarkFullSync30k is the share of a 30,000-Service (x 10 endpoints) initial
// sync that runs in the proxy's own code, between the API server and the kernel:
// the informers' objects converted and committed to the model, every Service
// rendered, and the full sync's operations encoded as netlink messages and read
// into the inventory that drift detection keeps (no socket). The daemon's initial
// sync in the bench lab adds the API lists and their decoding, the kernel's
// transaction, and the collections of a heap that grows from nothing; run with
// -cpuprofile, this benchmark is the profile of the rest (README, the targets of
// the rule-representation work).
func BenchmarkFullSync30k(b *testing.B) {
	const services, endpoints = 30000, 10
	svcs, epSlices := scaleObjects(services, endpoints)
	cfg := testRenderConfig()
	ex, err := nftnetlink.New(cfg.Family, render.TableName, nftnetlink.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		st := model.NewState(v1.IPv4Protocol, testNodeName)
		for i := range svcs {
			st.OnServiceAdd(svcs[i])
			st.AddEndpointSlice(epSlices[i])
		}
		if upd := st.Commit(); len(upd.Changed) != services {
			b.Fatalf("committed %d ServicePorts, want %d", len(upd.Changed), services)
		}
		base := render.RenderBase(&cfg)
		rs := render.NewState(&base, render.RenderServices(&cfg, collectViews(st)))
		if _, err := ex.InventoryOf(render.FullOps(rs)); err != nil {
			b.Fatal(err)
		}
	}
}
