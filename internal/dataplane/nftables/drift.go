package nftables

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
	"github.com/kproxy/kproxy/internal/drift"
	"github.com/kproxy/kproxy/internal/nft"
	"github.com/kproxy/kproxy/internal/nftnetlink"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// Inventories reads what the kernel holds of the table and what streams of
// operations write, in the same canonical form; nftnetlink.Executor implements
// it (over netlink, whichever writer writes).
type Inventories interface {
	InventoryOf(ops iter.Seq[nft.Op]) (*nftnetlink.Inventory, error)
	ApplyToInventory(inv *nftnetlink.Inventory, ops iter.Seq[nft.Op]) error
	ReadInventory(ctx context.Context) (*nftnetlink.Inventory, error)
	// Generation changes with every nftables transaction in the namespace.
	Generation(ctx context.Context) (uint32, error)
}

// TableCheckInterval is how often MonitorTable looks for the table (one netlink
// request): a deleted table is rewritten within about half a second, well within
// the 1 s kproxy promises (upstream waits for its hourly full sync).
const TableCheckInterval = 500 * time.Millisecond

// comparison is this proxier's half of drift detection: the kernel's table read
// over netlink, compared under the sync lock with the inventory of what was
// applied (read by a full sync from its own batch, kept up by partial ones;
// rebuilt when first needed after a full sync whose writer cannot read it).
func (p *Proxier) comparison() *proxycore.DriftComparison[*nftnetlink.Inventory] {
	inv := p.cfg.Inventories
	return &proxycore.DriftComparison[*nftnetlink.Inventory]{
		Generation: inv.Generation,
		Read: func(ctx context.Context) (*nftnetlink.Inventory, error) {
			defer p.largeWork()()
			k, err := inv.ReadInventory(ctx)
			if errors.Is(err, nftnetlink.ErrDumpInterrupted) {
				// Someone committed while a dump ran (the generation check would
				// find it too): read again later.
				return nil, fmt.Errorf("%w: %w", proxycore.ErrInconclusive, err)
			}
			return k, err
		},
		Compare: func(ctx context.Context, kernel *nftnetlink.Inventory, r *drift.Report) error {
			if p.applied == nil {
				return proxycore.ErrNothingApplied
			}
			if p.want == nil {
				defer p.largeWork()()
				want, err := inv.InventoryOf(render.FullOps(p.applied))
				if err != nil {
					return err
				}
				p.want = want
			}
			return nftnetlink.CompareInventories(ctx, p.want, kernel, r)
		},
	}
}

// largeWork enters the process's scope for work on the whole table (Config.FullSync:
// a lower GC target while it runs) and returns its end: reading the kernel's table
// and rebuilding the inventory of what was applied allocate, at 30,000 Services, a
// hundred MB or more that the heap would otherwise keep growing into.
func (p *Proxier) largeWork() (done func()) {
	if p.cfg.FullSync == nil {
		return func() {}
	}
	return p.cfg.FullSync()
}

// Verify compares the kernel's table with the applied state now (any goroutine);
// a sync holds it up only for the comparison itself, not for the kernel's listing.
func (p *Proxier) Verify(ctx context.Context) (*drift.Report, error) {
	return proxycore.CompareDrift(ctx, p.core, p.comparison())
}

// RunDriftChecks compares the kernel with the applied state once per
// DriftCheckPeriod and, when they differ, makes the next sync, triggered at once,
// a full one (proxycore.RunDriftChecks). It returns nil when ctx is done.
func (p *Proxier) RunDriftChecks(ctx context.Context, trigger func()) error {
	if p.cfg.Inventories == nil {
		return nil
	}
	return proxycore.RunDriftChecks(ctx, p.core, p.comparison(), trigger)
}

// Applied reports whether a sync has succeeded and nothing failed since (any
// goroutine): whether the table is expected to exist.
func (p *Proxier) Applied() bool { return p.hasApplied.Load() }

// keepInventory keeps the inventory of what was applied up to date after a
// successful write (the Sync goroutine): a full sync replaces it with written,
// the inventory its writer read from its own batch (nil when the writer cannot:
// the next comparison then rebuilds it under the sync lock), a partial one applies
// its operations to it.
func (p *Proxier) keepInventory(full bool, written *nftnetlink.Inventory, ops []nft.Op) {
	if full || p.cfg.Inventories == nil {
		p.want = written
		return
	}
	if p.want != nil && p.cfg.Inventories.ApplyToInventory(p.want, slices.Values(ops)) != nil {
		p.want = nil
	}
}

// MonitorTable checks every interval whether the table exists, as long as a sync
// has succeeded, and when it does not (someone deleted it: upstream notices at its
// next hourly full sync), makes the next sync a full one, records the missing table
// as drift, and calls trigger to run it now. It returns nil when ctx is done.
// exists is one cheap request (nftnetlink.Executor.TableExists). Errors are logged
// once per kind, not returned: the periodic comparison and full syncs still repair
// the table.
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
		if !p.Applied() || p.tableMissing.Load() {
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
			p.tableMissing.Store(true)
			trigger()
		}
	}
}
