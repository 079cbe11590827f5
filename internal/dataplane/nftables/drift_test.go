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

func (f *fakeInventories) ReadInventory(context.Context) (*nftnetlink.Inventory, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return nil, errors.New("set by the fixture")
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
	k.mu.Unlock()
	inv, _ := k.InventoryOf(fullOpsOf(k.proxier))
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

func TestDriftCheckFindsAndRepairs(t *testing.T) {
	f, kernel := newDriftFixture(t)
	f.AddStandardServices()
	f.sync()

	// Due after one period, on a sync with nothing to write: nothing differs.
	f.Clock.Step(30 * time.Second)
	runs := f.nft.runs()
	f.sync()
	if f.nft.runs() != runs {
		t.Fatal("a clean drift check wrote to the kernel")
	}
	if r := f.proxier.core.LastDrift(); r == nil || r.Count != 0 || r.Skipped {
		t.Fatalf("LastDrift after a clean check = %+v", r)
	}

	// Nothing was committed since: the next check reads nothing.
	reads := kernel.reads
	f.Clock.Step(30 * time.Second)
	f.sync()
	if r := f.proxier.core.LastDrift(); !r.Skipped || kernel.reads != reads {
		t.Fatalf("a check at an unchanged generation read the kernel (%d reads, report %+v)", kernel.reads-reads, r)
	}

	// A third party flushes a chain: the next check finds it and the same sync
	// rewrites the table.
	kernel.breakKernel(func(inv *nftnetlink.Inventory) { inv.Chains["services"].Rules = nil })
	f.Clock.Step(30 * time.Second)
	f.sync()
	kernel.breakKernel(nil)
	r := f.proxier.core.LastDrift()
	if r.Count != 1 || !strings.HasPrefix(r.Differences[0].String(), "changed rule services: ") {
		t.Fatalf("LastDrift after a flush = %+v", r)
	}
	if !f.lastWasFullRewrite() {
		t.Fatal("drift was not repaired by a full sync")
	}
	if v := f.metricValue("kubeproxy_kproxy_drift_repairs_total", dptest.IPv4Label); v != 1 {
		t.Errorf("kubeproxy_kproxy_drift_repairs_total = %v, want 1", v)
	}
	if v := f.metricValue("kubeproxy_kproxy_drift_objects", dptest.IPv4Label); v != 1 {
		t.Errorf("kubeproxy_kproxy_drift_objects = %v, want 1", v)
	}

	// The repairing full sync counts as a check: none is due until a period later.
	reads = kernel.reads
	f.Clock.Step(29 * time.Second)
	f.sync()
	if kernel.reads != reads {
		t.Error("a drift check ran within a period of the repairing full sync")
	}
}

// TestDriftCheckWaitsForAnIdleSync: a sync that carries a change is not delayed by
// a check until two periods have passed.
func TestDriftCheckWaitsForAnIdleSync(t *testing.T) {
	f, kernel := newDriftFixture(t)
	f.AddStandardServices()
	f.sync()
	reads := kernel.reads
	f.Clock.Step(31 * time.Second)
	f.State.UpdateEndpointSlice(nil, dptest.Slice("ns1", "web", "web-1", 8080, "http", "TCP", dptest.Ready("10.0.3.1", "node-c")))
	f.sync()
	if kernel.reads != reads {
		t.Fatal("a sync with a change ran a drift check within two periods")
	}
	f.Clock.Step(30 * time.Second)
	f.State.UpdateEndpointSlice(nil, dptest.Slice("ns1", "web", "web-1", 8080, "http", "TCP", dptest.Ready("10.0.3.2", "node-c")))
	f.sync()
	if kernel.reads != reads+1 {
		t.Fatal("no drift check after two periods of syncs with changes")
	}
}

func TestVerify(t *testing.T) {
	f, kernel := newDriftFixture(t)
	if _, err := f.proxier.Verify(context.Background()); !errors.Is(err, ErrNothingApplied) {
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
	var exists sync.Mutex
	gone := true
	triggered := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- f.proxier.MonitorTable(ctx, func(context.Context) (bool, error) {
			exists.Lock()
			defer exists.Unlock()
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
