package nftables

import (
	"testing"

	"github.com/kproxy/kproxy/internal/nftnetlink"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// BenchmarkFullSync10k and BenchmarkFullSync30k are the share of an initial sync of
// 10,000 and 30,000 Services (x 10 endpoints) that runs in the proxy's own code,
// between the API server and the kernel: the informers' objects converted and
// committed to the model, every Service rendered, and the full sync's operations
// encoded as netlink messages and read into the inventory that drift detection keeps
// (no socket). The daemon's initial sync in the bench lab adds the API lists and
// their decoding, the kernel's transaction, and the collections of a heap that grows
// from nothing; run with -cpuprofile, these benchmarks are the profile of the rest
// (README, the targets of the rule-representation work).
func BenchmarkFullSync10k(b *testing.B) { benchFullSync(b, 10000) }

func BenchmarkFullSync30k(b *testing.B) { benchFullSync(b, 30000) }

func benchFullSync(b *testing.B, services int) {
	const endpoints = 10
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
