package nftnetlink

import (
	"context"
	"os"
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

// TestMemoryFullSync10k reports the heap of each stage of a full sync of 10,000
// Services x 10 endpoints (model views, rendered state, transaction, netlink run)
// and the peak heap while the executor runs it: the executor's transient (text,
// tokens, batch) is what sets the daemon's peak RSS. Opt-in (KPROXY_KERNEL_TIMING=1,
// root): it programs a table in a namespace of its own.
func TestMemoryFullSync10k(t *testing.T) {
	if os.Getenv("KPROXY_KERNEL_TIMING") == "" {
		t.Skip("set KPROXY_KERNEL_TIMING=1 to run")
	}
	needRoot(t)
	const mib = 1 << 20
	base := liveHeap()
	cfg := testConfig(knftables.IPv4Family)
	views := scaleViews(10000, 10)
	afterViews := liveHeap()
	stop := peakHeap()
	st := renderState(cfg, views)
	renderPeak := stop()
	afterState := liveHeap()
	ex, err := New(cfg.Family, render.TableName, Options{NetNSPath: netnsPath(testNetns(t))})
	if err != nil {
		t.Fatal(err)
	}
	tx := ex.NewTransaction()
	stop = peakHeap()
	render.WriteFull(tx, st)
	txPeak := stop()
	afterTx := liveHeap()
	t.Logf("live heap: views %d MiB, rendered state %d MiB, transaction %d MiB (%d operations)",
		(afterViews-base)/mib, (afterState-afterViews)/mib, (afterTx-afterState)/mib, tx.NumOperations())
	t.Logf("peak heap in use while rendering %d MiB, while writing the transaction %d MiB", renderPeak/mib, txPeak/mib)

	stop = peakHeap()
	start := time.Now()
	if err := ex.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	peak := stop()
	t.Logf("executor run %v: peak heap in use %d MiB, %d MiB above the %d MiB live before it",
		d.Round(time.Millisecond), peak/mib, (peak-afterTx)/mib, afterTx/mib)
	runtime.KeepAlive(views)
	runtime.KeepAlive(st)
}
