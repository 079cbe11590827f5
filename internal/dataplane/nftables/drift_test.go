package nftables

import (
	"context"
	"errors"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/dataplane/dptest"
	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
	"github.com/kproxy/kproxy/internal/drift"
	"github.com/kproxy/kproxy/internal/nft"
	"github.com/kproxy/kproxy/internal/nftnetlink"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// fakeInventories is the kernel reader of drift detection: the inventory of a
// stream of operations holds its chains and rule counts, and the "kernel" is what
// the last full operations wrote, unless a test breaks it.
type fakeInventories struct {
	mu     sync.Mutex
	gen    uint32
	reads  int
	broken func(*nftnetlink.Inventory)
	// churn makes every read see a commit by someone else (the generation moves).
	churn bool
}

func (f *fakeInventories) InventoryOf(ops iter.Seq[nft.Op]) (*nftnetlink.Inventory, error) {
	inv := &nftnetlink.Inventory{Exists: true, Chains: map[string]*nftnetlink.InventoryChain{}, Sets: map[string]*nftnetlink.InventorySet{}, Counters: map[string]bool{}}
	for op := range ops {
		switch op.Kind {
		case nft.AddChain:
			inv.Chains[op.Name] = &nftnetlink.InventoryChain{}
		case nft.AddRule:
			if c := inv.Chains[op.Name]; c != nil {
				c.Rules = append(c.Rules, uint64(len(c.Rules)))
			}
		}
	}
	return inv, nil
}

// ApplyToInventory fails: the proxier then rebuilds the inventory of what it
// applied from a full rendering when it next compares (InventoryOf).
func (f *fakeInventories) ApplyToInventory(*nftnetlink.Inventory, iter.Seq[nft.Op]) error {
	return errors.New("the fake rebuilds")
}

func (f *fakeInventories) Generation(context.Context) (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gen, nil
}

// kernelInventories reads the "kernel" as the inventory of what the proxier last
// applied, broken by inv.broken when set.
type kernelInventories struct {
	*fakeInventories
	proxier *Proxier
}

func (k kernelInventories) ReadInventory(context.Context) (*nftnetlink.Inventory, error) {
	k.mu.Lock()
	k.reads++
	broken := k.broken
	if k.churn {
		k.gen++
	}
	k.mu.Unlock()
	// What the proxier applied, read under its lock as a kernel would hold it.
	var inv *nftnetlink.Inventory
	k.proxier.core.WithSyncLock(func() { inv, _ = k.InventoryOf(fullOpsOf(k.proxier)) })
	if broken != nil {
		broken(inv)
	}
	return inv, nil
}

func (f *fakeInventories) breakKernel(b func(*nftnetlink.Inventory)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.broken = b
	f.gen++
}

func newDriftFixture(t *testing.T) (*fixture, *fakeInventories) {
	fake := &fakeInventories{}
	var k kernelInventories
	f := newFixture(t, func(c *Config) {
		c.DriftCheckPeriod = 30 * time.Second
		c.Inventories = &k
	})
	k = kernelInventories{fakeInventories: fake, proxier: f.proxier}
	return f, fake
}

// waitDrift waits (bounded) until the last drift report satisfies ok.
func waitDrift(t *testing.T, f *fixture, what string, ok func(*drift.Report) bool) *drift.Report {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if r := f.proxier.core.LastDrift(); r != nil && ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("no drift report %s within 10 s (last: %+v)", what, f.proxier.core.LastDrift())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDriftCheckFindsAndRepairs(t *testing.T) {
	f, kernel := newDriftFixture(t)
	triggered := dptest.RunDriftChecks(t, f.proxier.RunDriftChecks)
	f.AddStandardServices()
	f.sync()

	// Due a period after the full sync: nothing differs.
	f.Clock.Step(30 * time.Second)
	first := waitDrift(t, f, "after a period", func(r *drift.Report) bool { return true })
	if first.Count != 0 || first.Skipped {
		t.Fatalf("first check = %+v, want a clean comparison", first)
	}

	// Nothing was committed since: the next check reads nothing.
	kernel.mu.Lock()
	reads := kernel.reads
	kernel.mu.Unlock()
	f.Clock.Step(30 * time.Second)
	waitDrift(t, f, "skipped", func(r *drift.Report) bool { return r.Skipped })
	kernel.mu.Lock()
	if kernel.reads != reads {
		t.Errorf("a check at an unchanged generation read the kernel")
	}
	kernel.mu.Unlock()

	// A third party flushes a chain: the next check finds it, requests a full
	// sync and triggers it.
	kernel.breakKernel(func(inv *nftnetlink.Inventory) { inv.Chains["services"].Rules = nil })
	f.Clock.Step(30 * time.Second)
	dptest.WaitTriggered(t, triggered)
	r := f.proxier.core.LastDrift()
	if r.Count != 1 || !strings.HasPrefix(r.Differences[0].String(), "changed rule services: ") {
		t.Fatalf("LastDrift after a flush = %+v", r)
	}
	kernel.breakKernel(nil)
	f.sync()
	if !f.lastWasFullRewrite() {
		t.Fatal("drift was not repaired by a full sync")
	}
	if v := f.metricValue("kubeproxy_kproxy_drift_repairs_total", dptest.IPv4Label); v != 1 {
		t.Errorf("kubeproxy_kproxy_drift_repairs_total = %v, want 1", v)
	}
	if v := f.metricValue("kubeproxy_kproxy_drift_objects", dptest.IPv4Label); v != 1 {
		t.Errorf("kubeproxy_kproxy_drift_objects = %v, want 1", v)
	}
}

// TestVerifyWhileTheRulesChange: a comparison whose read of the kernel saw a
// commit is made again; when every read does, Verify gives up with
// ErrInconclusive rather than report differences that are not there.
func TestVerifyWhileTheRulesChange(t *testing.T) {
	f, kernel := newDriftFixture(t)
	f.AddStandardServices()
	f.sync()
	kernel.mu.Lock()
	kernel.churn = true
	kernel.mu.Unlock()
	if _, err := f.proxier.Verify(context.Background()); !errors.Is(err, proxycore.ErrInconclusive) {
		t.Fatalf("Verify with a commit during every read: %v, want ErrInconclusive", err)
	}
	kernel.mu.Lock()
	kernel.churn = false
	kernel.mu.Unlock()
	if r, err := f.proxier.Verify(context.Background()); err != nil || r.Count != 0 {
		t.Fatalf("Verify once the rules are still: %+v, %v", r, err)
	}
}

func TestVerify(t *testing.T) {
	f, kernel := newDriftFixture(t)
	if _, err := f.proxier.Verify(context.Background()); !errors.Is(err, proxycore.ErrNothingApplied) {
		t.Fatalf("Verify before the first sync: %v, want ErrNothingApplied", err)
	}
	f.AddStandardServices()
	f.sync()
	kernel.breakKernel(func(inv *nftnetlink.Inventory) { inv.Exists = false })
	r, err := f.proxier.Verify(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r.Count != 1 || r.Differences[0].String() != "missing table " {
		t.Errorf("Verify with the table deleted = %+v", r)
	}
	// Verify only reports: nothing is rewritten until a sync.
	if f.proxier.core.LastDrift() != nil {
		t.Error("Verify recorded a background check")
	}
}

// TestMonitorTable: a deleted table requests a full sync and triggers it.
func TestMonitorTable(t *testing.T) {
	f, _ := newDriftFixture(t)
	f.AddStandardServices()
	f.sync()
	gone := true
	triggered := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- f.proxier.MonitorTable(ctx, func(context.Context) (bool, error) {
			return !gone, nil
		}, 10*time.Millisecond, func() {
			select {
			case triggered <- struct{}{}:
			default:
			}
		})
	}()
	select {
	case <-triggered:
	case <-time.After(10 * time.Second):
		t.Fatal("the monitor did not trigger a sync within 10 s of the table going missing")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("MonitorTable: %v", err)
	}
	f.sync()
	if !f.lastWasFullRewrite() {
		t.Error("the sync after the monitor's request was not full")
	}
	if r := f.proxier.core.LastDrift(); r == nil || r.Count != 1 || r.Differences[0].Kind != "table" {
		t.Errorf("LastDrift = %+v, want the missing table", r)
	}
}

// fullOpsOf is the full sync of what p applied.
func fullOpsOf(p *Proxier) iter.Seq[nft.Op] {
	if p.applied == nil {
		return func(func(nft.Op) bool) {}
	}
	return render.FullOps(p.applied)
}

// inventoryNFT is a writer that, like nftnetlink.Executor, returns the inventory
// of what a full sync wrote from its own batch (InventoryRunner).
type inventoryNFT struct {
	*recordingNFT
	inventories *fakeInventories
	written     []*nftnetlink.Inventory
}

func (w *inventoryNFT) RunOpsInventory(ctx context.Context, ops iter.Seq[nft.Op]) (*nftnetlink.Inventory, error) {
	tx := w.NewTransaction()
	render.AddOps(tx, ops)
	if err := w.Run(ctx, tx); err != nil {
		return nil, err
	}
	inv, err := w.inventories.InventoryOf(ops)
	w.written = append(w.written, inv)
	return inv, err
}

// TestFullSyncKeepsTheWritersInventory: with a writer that reads the inventory of
// a full sync from its own batch, the comparisons use it rather than rendering
// and encoding the table again under the sync lock.
func TestFullSyncKeepsTheWritersInventory(t *testing.T) {
	fake := &fakeInventories{}
	var k kernelInventories
	var w *inventoryNFT
	f := newFixture(t, func(c *Config) {
		c.DriftCheckPeriod = 30 * time.Second
		c.Inventories = &k
		w = &inventoryNFT{recordingNFT: c.NFT.(*recordingNFT), inventories: fake}
		c.NFT = w
	})
	k = kernelInventories{fakeInventories: fake, proxier: f.proxier}
	f.AddStandardServices()
	f.sync()
	if len(w.written) != 1 || f.proxier.want != w.written[0] {
		t.Fatalf("after a full sync the proxier keeps %p, want the writer's inventory (%d written)", f.proxier.want, len(w.written))
	}
	r, err := f.proxier.Verify(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r.Count != 0 {
		t.Errorf("Verify right after the full sync: %+v", r)
	}
	if f.proxier.want != w.written[0] {
		t.Error("the comparison rebuilt the inventory the writer gave")
	}
}
