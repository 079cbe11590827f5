package nftables

import (
	"testing"

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
		rs := renderFull(&cfg, modelOf(b, svcs, epSlices))
		if _, err := ex.InventoryOf(render.FullOps(rs)); err != nil {
			b.Fatal(err)
		}
	}
}
