package nftables

import (
	"context"
	"fmt"
	"iter"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
	"github.com/kproxy/kproxy/internal/drift"
	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/nft"
	"github.com/kproxy/kproxy/internal/nftnetlink"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// DefaultFullSyncPeriod is how often the whole table is rewritten even when nothing
// failed, as upstream does, to repair anything that changed the table behind our back.
const DefaultFullSyncPeriod = time.Hour

// Config configures a Proxier. Required: Family, State (proxycore.Config), Render,
// NFT.
type Config struct {
	proxycore.Config
	// Render is the renderer configuration; its ServiceCIDRs are replaced by
	// SetServiceCIDRs and its NodePortAddresses.IPs by NodePortIPs at each full sync.
	Render render.Config
	// NFT writes the kube-proxy table of Family.
	NFT knftables.Interface
	// FullSync, when set, is called before a full sync renders the whole table (and
	// before a drift comparison reads it or rebuilds the inventory of what was
	// applied),
	// and the function it returns once the transaction ran: the rendered state and
	// the transaction grow the heap by tens of MB at 10,000 Services, and the
	// process may bound the garbage collector's headroom meanwhile (a process-wide
	// knob that the caller owns, not this package).
	FullSync func() (done func())
	// AfterSync, when set, is called on the Sync goroutine after every Sync that
	// succeeded (one with nothing to write too), with whether it was a full sync and
	// the ServicePorts it applied as changed or deleted: for parts that follow the
	// applied model, such as the localhost NodePort listeners
	// (internal/localnodeports), which upstream syncs after each successful sync.
	AfterSync func(ctx context.Context, full bool, changed, deleted []model.ServicePortName)
	// Inventories, when set, reads the kernel's table for drift detection
	// (drift.go): Verify, and the background comparison every
	// Config.DriftCheckPeriod.
	Inventories Inventories
}

// Proxier programs one IP family; see the package documentation.
type Proxier struct {
	// Common: Inspectable, Precommit and RequestFullSync, as every mode's.
	proxycore.Common
	cfg Config

	mu           sync.Mutex
	serviceCIDRs []netip.Prefix
	cidrsChanged bool

	// tableMissing is set by MonitorTable; hasApplied is Applied's.
	tableMissing atomic.Bool
	hasApplied   atomic.Bool

	// Owned by the Sync goroutine (or under the Core's sync lock).
	// core is what every mode's proxier shares: model commits, node addresses,
	// the follow-up work.
	core      *proxycore.Core
	renderCfg render.Config
	base      *render.Fragment
	applied   *render.State
	// want is the inventory of what was applied, for drift comparisons (nil:
	// rebuilt when next needed).
	want *nftnetlink.Inventory
}

// New returns a Proxier; it touches nothing.
func New(cfg Config) (*Proxier, error) {
	if cfg.NFT == nil {
		return nil, fmt.Errorf("nftables proxier for %s: NFT is required", cfg.Family)
	}
	if err := cfg.Render.Validate(); err != nil {
		return nil, fmt.Errorf("nftables proxier for %s: %w", cfg.Family, err)
	}
	core, err := proxycore.New("nftables", &cfg.Config, DefaultFullSyncPeriod)
	if err != nil {
		return nil, err
	}
	return &Proxier{
		Common:       core.Common(),
		cfg:          cfg,
		core:         core,
		renderCfg:    cfg.Render,
		serviceCIDRs: cfg.Render.ServiceCIDRs,
	}, nil
}

// publish records, for the state API, the settings this sync wrote with.
func (p *Proxier) publish() {
	cfg := p.renderCfg
	p.core.Publish(proxycore.Published{
		NodePortAddresses: cfg.NodePortAddresses, LocalDetector: cfg.LocalDetector,
		ServiceCIDRs: cfg.ServiceCIDRs,
		Describe:     proxycore.Describer(&cfg, render.RenderService),
	})
}

// SetServiceCIDRs records the cluster's ServiceCIDRs of this family (any goroutine).
func (p *Proxier) SetServiceCIDRs(cidrs []netip.Prefix) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Equal(p.serviceCIDRs, cidrs) {
		p.serviceCIDRs = slices.Clone(cidrs)
		p.cidrsChanged = true
	}
}

// Sync applies every change committed to the model since the last successful Sync.
// It reports whether it sent a transaction to the kernel (accepted or not).
func (p *Proxier) Sync(ctx context.Context) (bool, error) {
	p.core.LockForSync()
	defer p.core.UnlockSync()
	logger, start, update := p.core.Begin(ctx)
	baseChanged := p.refreshRenderConfig(ctx)
	full := p.applied == nil || p.core.TakeFullSyncRequest() || p.core.FullSyncDue(start)
	if p.tableMissing.Swap(false) && p.applied != nil {
		// The table monitor found the table deleted.
		r := &drift.Report{Family: string(p.cfg.Family), Checked: start}
		r.Add(drift.Difference{Kind: "table", Change: drift.Missing})
		p.core.RecordDrift(ctx, r, true)
		full = true
	}
	if !full && !baseChanged && len(update.Changed) == 0 && len(update.Deleted) == 0 {
		p.core.FollowUp.Succeeded(ctx, update, start, false)
		p.afterSync(ctx, false, update.Changed, update.Deleted)
		p.core.Record(start, update, false, false, 0, nil)
		return false, nil
	}

	var (
		run    func() error
		ops    int
		commit func()
		// replace, when set, is the full sync that replaces the table, for when
		// the kernel refused run's refresh of it.
		replace func() error
	)
	if full {
		if p.cfg.FullSync != nil {
			defer p.cfg.FullSync()()
		}
		// The previous state is not needed by a full sync: let the collector have
		// it while the new one is rendered (a failed sync would drop it anyway).
		p.applied = nil
		base := render.RenderBase(&p.renderCfg)
		st := render.NewState(&base, render.RenderServices(&p.renderCfg, slices.Collect(p.cfg.State.Views())))
		existing := p.existingObjects(ctx)
		var written *nftnetlink.Inventory
		run = p.fullSyncRunner(ctx, st, existing, &ops, &written)
		if existing != nil {
			replace = p.fullSyncRunner(ctx, st, nil, &ops, &written)
		}
		commit = func() {
			p.base, p.applied = &base, st
			p.core.FullSyncDone(start)
			p.keepInventory(true, written, nil)
		}
	} else {
		updates := proxycore.RenderChanged(p.cfg.State, update, func(v *model.ServicePortView) render.Fragment {
			return render.RenderService(&p.renderCfg, v)
		})
		var newBase *render.Fragment
		if baseChanged {
			b := render.RenderBase(&p.renderCfg)
			newBase = &b
		}
		plan := p.applied.Plan(newBase, updates, render.PlanOptions{})
		run = p.opsRunner(ctx, slices.Values(plan.Ops), &ops)
		commit = func() {
			p.applied.Commit(plan)
			if newBase != nil {
				p.base = newBase
			}
			p.keepInventory(false, nil, plan.Ops)
		}
	}

	err := run()
	// Only the kernel's refusal of the refresh calls for the replacement, which
	// resets session affinity: when the socket failed (nftnetlink.SocketError),
	// the refresh itself is what the retry must try again.
	if err != nil && replace != nil && !nftnetlink.IsSocketError(err) {
		logger.Info("The kernel refused to refresh the table in place; replacing it, which resets session affinity", "err", err)
		err = replace()
	}
	if err != nil {
		// The kernel still holds the previous whole state (or, when the socket
		// failed after the kernel took the batch, maybe the new one). Forget what
		// we think is applied so that the retry rewrites the table from the model,
		// and keep the conntrack work of this update for the sync that succeeds.
		p.applied, p.want = nil, nil
		p.hasApplied.Store(false)
		p.core.FollowUp.Failed(update)
		p.cfg.Metrics.IncNFTablesSyncFailures()
		err = fmt.Errorf("nftables %s transaction (%d operations, full=%t): %w", p.cfg.Family, ops, full, err)
		p.core.Record(start, update, full, true, ops, err)
		return true, err
	}
	commit()
	if ops > 0 {
		p.core.CountWrite()
	}
	p.hasApplied.Store(true)
	logger.V(2).Info("Synced nftables rules", "full", full, "changed", len(update.Changed), "deleted", len(update.Deleted),
		"operations", ops, "elapsed", p.cfg.Clock.Since(start))
	p.core.FollowUp.Succeeded(ctx, update, start, full)
	p.afterSync(ctx, full, update.Changed, update.Deleted)
	if ops > 0 {
		p.publish()
	}
	p.core.Record(start, update, full, ops > 0, ops, nil)
	return ops > 0, nil
}

func (p *Proxier) afterSync(ctx context.Context, full bool, changed, deleted []model.ServicePortName) {
	if p.cfg.AfterSync != nil {
		p.cfg.AfterSync(ctx, full, changed, deleted)
	}
}

// OpsRunner is implemented by writers that apply a stream of typed operations as
// one atomic transaction (nftnetlink.Executor): every sync, full (render.FullOps)
// or partial (render.Plan.Ops), is then encoded from the renderer's operations,
// never through a knftables transaction or text.
type OpsRunner interface {
	RunOps(ctx context.Context, ops iter.Seq[nft.Op]) error
}

// InventoryRunner is an OpsRunner that, writing a full sync, also returns the
// inventory of the table it leaves, read from its own batch
// (nftnetlink.Executor.RunOpsInventory): drift detection then has what was
// applied without rendering and encoding the table a second time.
type InventoryRunner interface {
	RunOpsInventory(ctx context.Context, ops iter.Seq[nft.Op]) (*nftnetlink.Inventory, error)
}

// existingObjects lists the table's chains, sets and maps, for a full sync that
// refreshes the table in place (keeping session-affinity memory, as upstream). It
// returns nil, for a full sync that replaces the table, when the listing fails.
func (p *Proxier) existingObjects(ctx context.Context) *render.Existing {
	all, err := p.cfg.NFT.ListAll(ctx)
	switch {
	case knftables.IsNotFound(err):
		return &render.Existing{}
	case err != nil:
		klog.FromContext(ctx).Error(err, "Failed to list the kube-proxy table; replacing it, which resets session affinity", "ipFamily", p.cfg.Family)
		return nil
	}
	return &render.Existing{Chains: all["chain"], Sets: all["set"], Maps: all["map"], Counters: all["counter"]}
}

// fullSyncRunner returns the function that writes the full sync of st, counting
// its operations into ops: a refresh of the table holding existing, or its
// replacement when existing is nil.
// With a writer that reads the inventory of what it wrote from its own batch
// (InventoryRunner) and drift detection on, written receives that inventory.
func (p *Proxier) fullSyncRunner(ctx context.Context, st *render.State, existing *render.Existing, ops *int, written **nftnetlink.Inventory) func() error {
	stream := render.FullOps(st)
	if existing != nil {
		stream = render.RefreshOps(st, existing)
	}
	if runner, ok := p.cfg.NFT.(InventoryRunner); ok && p.cfg.Inventories != nil {
		return func() error {
			inv, err := runner.RunOpsInventory(ctx, countOps(stream, ops))
			*written = inv
			return err
		}
	}
	return p.opsRunner(ctx, stream, ops)
}

// countOps yields stream, storing into n how many operations it yielded once an
// iteration is complete: a runner iterates again, up to the failing operation, to
// quote it in an error.
func countOps(stream iter.Seq[nft.Op], n *int) iter.Seq[nft.Op] {
	return func(yield func(nft.Op) bool) {
		k := 0
		for op := range stream {
			k++
			if !yield(op) {
				return
			}
		}
		*n = k
	}
}

// opsRunner returns the function that writes stream as one transaction, counting
// its operations into ops: encoded directly by an OpsRunner (the netlink writer),
// else added to a knftables transaction (the nft binary's writer, a Fake).
func (p *Proxier) opsRunner(ctx context.Context, stream iter.Seq[nft.Op], ops *int) func() error {
	if runner, ok := p.cfg.NFT.(OpsRunner); ok {
		return func() error { return runner.RunOps(ctx, countOps(stream, ops)) }
	}
	return func() error {
		tx := p.cfg.NFT.NewTransaction()
		render.AddOps(tx, stream)
		*ops = tx.NumOperations()
		return p.cfg.NFT.Run(ctx, tx)
	}
}

// refreshRenderConfig folds the latest ServiceCIDRs and NodePort addresses into the
// render configuration; it reports whether the base fragment must be re-rendered.
func (p *Proxier) refreshRenderConfig(ctx context.Context) bool {
	changed := false
	p.mu.Lock()
	if p.cidrsChanged {
		p.renderCfg.ServiceCIDRs = p.serviceCIDRs
		p.cidrsChanged = false
		changed = true
	}
	p.mu.Unlock()
	if p.core.RefreshNodePortIPs(ctx, &p.renderCfg.NodePortAddresses) {
		changed = true
	}
	return changed && p.applied != nil
}
