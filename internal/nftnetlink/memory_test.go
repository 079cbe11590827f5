package nftnetlink

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/knftables"

	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// liveHeap collects garbage and returns what stays reachable.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// peakHeap samples the heap in use (what the process has touched for Go objects,
// live or not yet collected) every millisecond until stop is called.
func peakHeap() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() uint64 { close(done); <-finished; return peak.Load() }
}

// BenchmarkMemoryFullSync10k reports the heap of each stage of a full sync of 10,000
// Services x 10 endpoints (model views, rendered state, then the write) and the
// peak heap while it is written: that transient, above what stays live, is what
// sets the daemon's peak RSS. "ops" is render.FullOps encoded by RunOps (no text);
// "inventory" is the daemon's path with drift detection (its default), the same
// through RunOpsInventory, which also reads the batch into the inventory it
// returns (kept live, as the daemon keeps it); "transaction" is the nft writer's (a
// knftables transaction, here run by the executor through its text). One
// iteration is the whole experiment, in a network namespace of its own; it needs
// root.
func BenchmarkMemoryFullSync10k(b *testing.B) {
	needRoot(b)
	for _, path := range []string{"ops", "inventory", "transaction"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				memoryFullSync(b, path)
			}
		})
	}
}

func memoryFullSync(b *testing.B, path string) {
	const mib = 1 << 20
	base := liveHeap()
	cfg := testConfig(knftables.IPv4Family)
	cfg.EndpointMaps = true // the daemon's layout (internal/app)
	views := scaleViews(10000, 10)
	afterViews := liveHeap()
	stop := peakHeap()
	st := renderState(cfg, views)
	renderPeak := stop()
	afterState := liveHeap()
	b.ReportMetric(float64(afterViews-base)/mib, "views-live-MiB")
	b.ReportMetric(float64(afterState-afterViews)/mib, "state-live-MiB")
	b.ReportMetric(float64(renderPeak)/mib, "render-peak-MiB")
	ex, err := New(cfg.Family, render.TableName, Options{NetNSPath: netnsPath(testNetns(b))})
	if err != nil {
		b.Fatal(err)
	}
	var (
		run func() error
		inv *Inventory
	)
	before := afterState
	switch path {
	case "ops":
		run = func() error { return ex.RunOps(context.Background(), render.FullOps(st)) }
	case "inventory":
		run = func() (err error) {
			inv, err = ex.RunOpsInventory(context.Background(), render.FullOps(st))
			return err
		}
	default:
		tx := ex.NewTransaction()
		stop = peakHeap()
		render.WriteFull(tx, st)
		txPeak := stop()
		before = liveHeap()
		b.ReportMetric(float64(tx.NumOperations()), "full-ops")
		b.ReportMetric(float64(before-afterState)/mib, "transaction-live-MiB")
		b.ReportMetric(float64(txPeak)/mib, "transaction-peak-MiB")
		run = func() error { return ex.Run(context.Background(), tx) }
	}

	stop = peakHeap()
	start := time.Now()
	if err := run(); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	peak := stop()
	b.ReportMetric(ms(d), "run-ms")
	b.ReportMetric(float64(peak)/mib, "run-peak-MiB")
	b.ReportMetric(float64(before)/mib, "live-before-run-MiB")
	b.ReportMetric((float64(peak)-float64(before))/mib, "run-above-live-MiB")
	if inv != nil {
		b.ReportMetric(float64(liveHeap()-before)/mib, "inventory-live-MiB")
	}
	runtime.KeepAlive(views)
	runtime.KeepAlive(st)
	runtime.KeepAlive(inv)
}
