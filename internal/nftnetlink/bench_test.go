package nftnetlink

import (
	"context"
	"slices"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/drift"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// BenchmarkBuildFull10k measures translating a full sync of 10,000 Services x 10
// endpoints into a netlink batch (no kernel involved).
func BenchmarkBuildFull10k(b *testing.B) {
	cfg := testConfig(knftables.IPv4Family)
	st := renderState(cfg, scaleViews(10000, 10))
	ex, err := New(cfg.Family, render.TableName, Options{})
	if err != nil {
		b.Fatal(err)
	}
	tx := ex.NewTransaction()
	render.WriteFull(tx, st)
	text := tx.String()
	b.ResetTimer()
	for b.Loop() {
		if _, err := ex.build(slices.Values([]string{text}), nil, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScriptFull10k measures what a full sync of 10,000 Services x 10
// endpoints (endpoint maps, as the daemon) costs before the kernel: the script's
// text written (render.FullScript) and translated into a netlink batch.
func BenchmarkScriptFull10k(b *testing.B) {
	cfg := testConfig(knftables.IPv4Family)
	cfg.EndpointMaps = true
	st := renderState(cfg, scaleViews(10000, 10))
	ex, err := New(cfg.Family, render.TableName, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		bd, err := ex.build(render.FullScript(st, cfg.Family, 256<<10), nil, true)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(bd.size())/1e6, "MB")
	}
}

// BenchmarkScriptTextFull10k is the text part of BenchmarkScriptFull10k alone.
func BenchmarkScriptTextFull10k(b *testing.B) {
	cfg := testConfig(knftables.IPv4Family)
	cfg.EndpointMaps = true
	st := renderState(cfg, scaleViews(10000, 10))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		n := 0
		for piece := range render.FullScript(st, cfg.Family, 256<<10) {
			n += len(piece)
		}
		b.ReportMetric(float64(n)/1e6, "MB")
	}
}

// BenchmarkOpsFull10k is BenchmarkScriptFull10k for the typed path: the full
// sync's operations (render.FullOps) encoded into a netlink batch, with no text.
func BenchmarkOpsFull10k(b *testing.B) {
	cfg := testConfig(knftables.IPv4Family)
	cfg.EndpointMaps = true
	st := renderState(cfg, scaleViews(10000, 10))
	ex, err := New(cfg.Family, render.TableName, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		bd, err := ex.buildOps(render.FullOps(st), nil, true)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(bd.b.size())/1e6, "MB")
	}
}

// BenchmarkInventoryOf10k measures the applied side of a drift check at 10,000
// Services x 10 endpoints (endpoint maps, as the daemon): the full sync's
// operations encoded without a socket and reduced to an inventory.
func BenchmarkInventoryOf10k(b *testing.B) {
	cfg := testConfig(knftables.IPv4Family)
	cfg.EndpointMaps = true
	st := renderState(cfg, scaleViews(10000, 10))
	ex, err := New(cfg.Family, render.TableName, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := ex.InventoryOf(render.FullOps(st)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBatchInventory10k measures what RunOpsInventory adds to a full sync at
// 10,000 Services x 10 endpoints: the batch it sent read into an inventory.
func BenchmarkBatchInventory10k(b *testing.B) {
	cfg := testConfig(knftables.IPv4Family)
	cfg.EndpointMaps = true
	st := renderState(cfg, scaleViews(10000, 10))
	ex, err := New(cfg.Family, render.TableName, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		// inventory consumes the batch: each iteration reads a new one.
		b.StopTimer()
		t, err := ex.buildOps(render.FullOps(st), nil, true)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t.inventory()
	}
}

// BenchmarkReadInventory10k measures the kernel side of a drift check at 10,000
// Services x 10 endpoints: the table dumped from the kernel (root, in a private
// namespace) and reduced to an inventory.
func BenchmarkReadInventory10k(b *testing.B) {
	needRoot(b)
	ns := testNetns(b)
	cfg := testConfig(knftables.IPv4Family)
	cfg.EndpointMaps = true
	st := renderState(cfg, scaleViews(10000, 10))
	ex, err := New(cfg.Family, render.TableName, Options{NetNSPath: netnsPath(ns)})
	if err != nil {
		b.Fatal(err)
	}
	if err := ex.RunOps(context.Background(), render.FullOps(st)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := ex.ReadInventory(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompareInventories10k measures the part of a drift check at 10,000
// Services x 10 endpoints that holds the proxier's sync lock: two inventories of
// the same table compared.
func BenchmarkCompareInventories10k(b *testing.B) {
	cfg := testConfig(knftables.IPv4Family)
	cfg.EndpointMaps = true
	st := renderState(cfg, scaleViews(10000, 10))
	ex, err := New(cfg.Family, render.TableName, Options{})
	if err != nil {
		b.Fatal(err)
	}
	want, err := ex.InventoryOf(render.FullOps(st))
	if err != nil {
		b.Fatal(err)
	}
	got, err := ex.InventoryOf(render.FullOps(st))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var r drift.Report
		_ = CompareInventories(context.Background(), want, got, &r)
		if r.Count != 0 {
			b.Fatalf("%d differences", r.Count)
		}
	}
}
