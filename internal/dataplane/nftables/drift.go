package nftables

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/drift"
	"github.com/kproxy/kproxy/internal/nft"
	"github.com/kproxy/kproxy/internal/nftnetlink"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// Inventories reads what the kernel holds of the table and what a stream of
// operations writes, in the same canonical form; nftnetlink.Executor implements
// it (over netlink, whichever writer writes).
type Inventories interface {
	InventoryOf(ops iter.Seq[nft.Op]) (*nftnetlink.Inventory, error)
	ReadInventory(ctx context.Context) (*nftnetlink.Inventory, error)
	// Generation changes with every nftables transaction in the namespace.
	Generation(ctx context.Context) (uint32, error)
}

// TableCheckInterval is how often MonitorTable looks for the table (one netlink
// request): a deleted table is rewritten within about half a second, well within
// the 1 s kproxy promises (upstream waits for its hourly full sync).
const TableCheckInterval = 500 * time.Millisecond

// RunDriftTimer requests a sync (trigger) whenever a drift check becomes due, so
// that it runs within about one sync period of the last (proxycore.RunDriftTimer);
// it returns nil when ctx is done.
func (p *Proxier) RunDriftTimer(ctx context.Context, trigger func()) error {
	return p.core.RunDriftTimer(ctx, trigger)
}

// ErrNothingApplied is Verify's error before the first successful sync.
var ErrNothingApplied = errors.New("nothing applied yet: the first sync has not succeeded")

// Verify compares the kernel's table with the last applied state now, waiting
// for a sync in progress to end (any goroutine).
func (p *Proxier) Verify(ctx context.Context) (*drift.Report, error) {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	return p.verify(ctx, false)
}

// RequestFullSync makes the next Sync rewrite the whole table (any goroutine):
// the table monitor found it deleted.
func (p *Proxier) RequestFullSync() { p.fullSyncRequested.Store(true) }

// Applied reports whether a sync has succeeded and nothing failed since (any
// goroutine): whether the table is expected to exist.
func (p *Proxier) Applied() bool { return p.hasApplied.Load() }

// verify compares the kernel with p.applied (the sync goroutine, or under
// syncMu). With mayskip, a comparison that found nothing at the same ruleset
// generation is not repeated: nothing was committed to nftables since.
func (p *Proxier) verify(ctx context.Context, mayskip bool) (*drift.Report, error) {
	inv := p.cfg.Inventories
	if inv == nil {
		return nil, errors.New("no kernel reader configured")
	}
	if p.applied == nil {
		return nil, ErrNothingApplied
	}
	start := p.cfg.Clock.Now()
	r := &drift.Report{Family: string(p.cfg.Family), Checked: start}
	gen, err := inv.Generation(ctx)
	if err != nil {
		return nil, err
	}
	if mayskip && p.cleanGeneration != nil && *p.cleanGeneration == gen {
		r.Skipped = true
		r.Duration = p.cfg.Clock.Since(start).Seconds()
		return r, nil
	}
	want, err := inv.InventoryOf(render.FullOps(p.applied))
	if err != nil {
		return nil, fmt.Errorf("inventory of the applied state: %w", err)
	}
	got, err := inv.ReadInventory(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the kernel's table: %w", err)
	}
	nftnetlink.CompareInventories(want, got, r)
	p.cleanGeneration = nil
	if after, err := inv.Generation(ctx); err == nil && after == gen && r.Count == 0 {
		// Read at one generation and identical: until the generation moves, the
		// kernel still matches.
		p.cleanGeneration = &gen
	}
	r.Duration = p.cfg.Clock.Since(start).Seconds()
	return r, nil
}

// MonitorTable checks every interval whether the table exists, as long as a sync
// has succeeded, and when it does not (someone deleted it: upstream notices at its
// next hourly full sync), requests a full sync and calls trigger to run it now. It
// returns nil when ctx is done. exists is one cheap request
// (nftnetlink.Executor.TableExists). Errors are logged once per kind, not
// returned: the periodic comparison and full syncs still repair the table.
func (p *Proxier) MonitorTable(ctx context.Context, exists func(context.Context) (bool, error), interval time.Duration, trigger func()) error {
	logger := klog.FromContext(ctx).WithValues("ipFamily", p.cfg.Family)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		if !p.Applied() || p.fullSyncRequested.Load() {
			continue
		}
		ok, err := exists(ctx)
		if err != nil {
			if err.Error() != lastErr && ctx.Err() == nil {
				logger.Error(err, "Failed to check that the kube-proxy table exists")
			}
			lastErr = err.Error()
			continue
		}
		lastErr = ""
		if !ok && p.Applied() {
			p.RequestFullSync()
			trigger()
		}
	}
}
