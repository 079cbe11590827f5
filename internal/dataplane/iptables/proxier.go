package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/metrics"
	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/nfacct"
	render "github.com/kproxy/kproxy/internal/render/iptables"
)

// DefaultFullSyncPeriod is upstream's proxyutil.FullSyncPeriod: how often every
// chain is rewritten even when nothing failed, except in large clusters.
const DefaultFullSyncPeriod = time.Hour

// DefaultLargeClusterEndpoints is upstream's largeClusterEndpointsThreshold: above
// this many endpoints, endpoint rules lose their comments and periodic full syncs
// stop.
const DefaultLargeClusterEndpoints = 1000

// Config configures a Proxier. Required: Family, State (proxycore.Config), Render,
// IPT.
type Config struct {
	proxycore.Config
	// Render is the renderer configuration; its NodePortAddresses.IPs are replaced by
	// NodePortIPs at each sync and its LargeCluster by the proxier.
	Render render.Config
	// IPT writes the rules of Family.
	IPT iptables.Interface
	// NFAcct creates the nfacct counters that upstream's rules count INVALID drops
	// and accepted localhost NodePort packets into (the kubeproxy_iptables_*
	// packet metrics read them). Each full sync ensures them, and the rules name
	// them only while they exist; nil leaves them out, as upstream without nfacct.
	NFAcct nfacct.Interface
	// LargeClusterEndpoints defaults to DefaultLargeClusterEndpoints.
	LargeClusterEndpoints int
}

// Proxier programs one IP family; see the package documentation.
type Proxier struct {
	// Common: Inspectable, Precommit and RequestFullSync, as every mode's.
	proxycore.Common
	cfg Config

	// Owned by the Sync goroutine.
	// core is what every mode's proxier shares: model commits, node addresses,
	// the follow-up work.
	core      *proxycore.Core
	renderCfg render.Config
	base      *render.Fragment
	applied   *render.State
	buf       bytes.Buffer
	// endpoints counts the endpoints of each ServicePort (upstream's largeClusterMode
	// input), total their sum.
	endpoints map[model.ServicePortName]int
	total     int
}

// New returns a Proxier; it touches nothing.
func New(cfg Config) (*Proxier, error) {
	if cfg.IPT == nil {
		return nil, fmt.Errorf("iptables proxier for %s: IPT is required", cfg.Family)
	}
	if cfg.Render.Family != cfg.Family {
		return nil, fmt.Errorf("iptables proxier for %s: renderer configured for %q", cfg.Family, cfg.Render.Family)
	}
	if err := cfg.Render.Validate(); err != nil {
		return nil, fmt.Errorf("iptables proxier for %s: %w", cfg.Family, err)
	}
	if cfg.LargeClusterEndpoints <= 0 {
		cfg.LargeClusterEndpoints = DefaultLargeClusterEndpoints
	}
	core, err := proxycore.New("iptables", &cfg.Config, DefaultFullSyncPeriod)
	if err != nil {
		return nil, err
	}
	return &Proxier{
		Common:    core.Common(),
		cfg:       cfg,
		core:      core,
		renderCfg: cfg.Render,
		endpoints: map[model.ServicePortName]int{},
	}, nil
}

// publish records, for the state API, the settings this sync wrote with.
func (p *Proxier) publish() {
	cfg := p.renderCfg
	p.core.Publish(proxycore.Published{
		NodePortAddresses: cfg.NodePortAddresses, LocalDetector: cfg.LocalDetector,
		Describe: proxycore.Describer(&cfg, render.RenderService),
	})
}

// Sync applies every change committed to the model since the last successful Sync.
// It reports whether it sent anything to the kernel (accepted or not).
func (p *Proxier) Sync(ctx context.Context) (bool, error) {
	p.core.LockForSync()
	defer p.core.UnlockSync()
	logger, start, update := p.core.Begin(ctx)
	ctx = klog.NewContext(ctx, logger)
	full := p.applied == nil || p.core.TakeFullSyncRequest() ||
		// As upstream, no periodic full sync in large clusters.
		(p.core.FullSyncDue(start) && !p.renderCfg.LargeCluster)
	baseChanged := p.core.RefreshNodePortIPs(ctx, &p.renderCfg.NodePortAddresses) && p.applied != nil
	if p.countEndpoints(update, full) {
		// Every endpoint rule gains or loses its comment.
		full = true
	}

	if !full {
		wrote, err := p.partialSync(ctx, update, baseChanged)
		if err == nil {
			logger.V(2).Info("Synced iptables rules", "full", false, "changed", len(update.Changed), "deleted", len(update.Deleted),
				"elapsed", p.cfg.Clock.Since(start))
			p.core.FollowUp.Succeeded(ctx, update, start, false)
			if wrote {
				p.publish()
			}
			p.core.Record(start, update, false, wrote, 0, nil)
			return wrote, nil
		}
		// What the kernel holds is unknown now (the legacy backend commits table by
		// table): rewrite everything at once, as upstream's next sync would.
		p.cfg.Metrics.IncIPTablesRestoreFailures()
		p.cfg.Metrics.IncIPTablesPartialRestoreFailures()
		logger.Error(err, "Partial iptables sync failed; doing a full sync")
		p.recount()
	}

	if err := p.fullSync(ctx, start); err != nil {
		p.applied = nil
		p.core.FollowUp.Failed(update)
		p.core.Record(start, update, true, true, 0, err)
		return true, err
	}
	logger.V(2).Info("Synced iptables rules", "full", true, "services", p.applied.Len(), "endpoints", p.total,
		"elapsed", p.cfg.Clock.Since(start))
	p.core.FollowUp.Succeeded(ctx, update, start, true)
	p.publish()
	p.core.Record(start, update, true, true, 0, nil)
	return true, nil
}

// partialSync writes the fragments of the ServicePorts that changed, and the new
// base fragment when baseChanged; it reports whether it wrote anything.
func (p *Proxier) partialSync(ctx context.Context, update *model.Update, baseChanged bool) (bool, error) {
	updates := proxycore.RenderChanged(p.cfg.State, update, func(v *model.ServicePortView) render.Fragment {
		return render.RenderService(&p.renderCfg, v)
	})
	var newBase *render.Fragment
	if baseChanged {
		b := render.RenderBase(&p.renderCfg)
		newBase = &b
	}
	p.buf.Reset()
	plan := p.applied.Plan(&p.buf, newBase, updates)
	wrote := p.buf.Len() > 0
	if wrote {
		if err := p.restore(ctx, false); err != nil {
			return true, err
		}
	}
	p.applied.Commit(plan)
	if newBase != nil {
		p.base = newBase
	}
	p.recordRules(plan.Written)
	return wrote, nil
}

// fullSync ensures the jumps from the built-in chains, then rewrites every chain of
// kproxy and deletes the per-ServicePort chains nothing renders (ours or a previous
// proxy's).
func (p *Proxier) fullSync(ctx context.Context, start time.Time) error {
	// iptables-restore cannot add a rule to a built-in chain without flushing it:
	// the jumps are ensured one by one, on full syncs only (first sync, after a
	// flush noticed by the canary, after a failure), as upstream.
	p.core.CountWrite()
	for _, j := range render.JumpRules() {
		if err := iptables.EnsureJump(ctx, p.cfg.IPT, iptables.Table(j.Table), iptables.Chain(j.Chain), iptables.Chain(j.Target), j.Args); err != nil {
			return err
		}
	}

	p.ensureCounters(ctx)

	var existing []string
	if p.applied != nil {
		existing = p.applied.Chains(render.TableNAT)
	}
	var save bytes.Buffer
	if err := p.cfg.IPT.SaveInto(ctx, iptables.TableNAT, &save); err != nil {
		klog.FromContext(ctx).Error(err, "Failed to list the nat table: stale chains will not be deleted")
	} else {
		for _, c := range iptables.ChainsInSave(save.Bytes()) {
			existing = append(existing, string(c))
		}
	}

	base := render.RenderBase(&p.renderCfg)
	st := render.NewState(&base, render.RenderServices(&p.renderCfg, slices.Collect(p.cfg.State.Views())))
	p.buf.Reset()
	written := render.WriteFull(&p.buf, st, existing)
	if err := p.restore(ctx, true); err != nil {
		return err
	}
	p.base, p.applied = &base, st
	p.core.FullSyncDone(start)
	p.recordRules(written)
	return nil
}

// ensureCounters creates the nfacct counters, as upstream does on every full sync,
// and lets the rules name those that exist: a rule naming a missing counter would
// make the whole restore fail.
func (p *Proxier) ensureCounters(ctx context.Context) {
	if p.cfg.NFAcct == nil {
		return
	}
	ensure := func(name string) bool {
		if err := p.cfg.NFAcct.Ensure(name); err != nil {
			klog.FromContext(ctx).Error(err, "Failed to create nfacct counter; the corresponding metric will not be updated", "counter", name)
			return false
		}
		return true
	}
	p.renderCfg.CountInvalidDrops = ensure(metrics.IPTablesCTStateInvalidDroppedNFAcctCounter)
	p.renderCfg.CountLocalhostNodePorts = ensure(metrics.LocalhostNodePortAcceptedNFAcctCounter)
}

// restore runs the restore input in p.buf. A failed full restore is counted here;
// a failed partial one by the caller, which then does a full one.
func (p *Proxier) restore(ctx context.Context, full bool) error {
	p.core.CountWrite() // before: a failed restore may have changed a table (legacy commits table by table)
	err := p.cfg.IPT.Restore(ctx, p.buf.Bytes())
	if err == nil {
		return nil
	}
	var re *iptables.RestoreError
	if errors.As(err, &re) && re.Line > 0 {
		klog.FromContext(ctx).Error(err, "iptables-restore failed", "full", full, "lines", iptables.Lines(p.buf.Bytes(), re.Line, 3, 3))
	}
	if full {
		p.cfg.Metrics.IncIPTablesRestoreFailures()
	}
	return fmt.Errorf("iptables %s restore (%d bytes, full=%t): %w", p.cfg.Family, p.buf.Len(), full, err)
}

// recordRules sets the rule gauges: the rules in kproxy's chains, and those the last
// restore wrote.
func (p *Proxier) recordRules(w render.Written) {
	for _, t := range render.Tables() {
		p.cfg.Metrics.SetIPTablesRules(string(t), p.applied.Rules(t))
		p.cfg.Metrics.SetIPTablesRulesLastSync(string(t), w.Rules[t])
	}
}

// countEndpoints keeps the endpoint count current (upstream counts every endpoint
// of every ServicePort) and switches the renderer's large-cluster mode when it
// crosses the threshold; it reports a switch, which needs a full sync. Partial
// syncs recount the ServicePorts whose view changed; full syncs recount all.
func (p *Proxier) countEndpoints(update *model.Update, all bool) bool {
	if all {
		p.recount()
	} else {
		for _, name := range update.Changed {
			p.setEndpoints(name, len(p.cfg.State.Endpoints(name)))
		}
		for _, name := range update.Deleted {
			p.setEndpoints(name, 0)
		}
	}
	return p.updateLargeCluster()
}

// recount counts the endpoints of every ServicePort again.
func (p *Proxier) recount() {
	clear(p.endpoints)
	p.total = 0
	for _, name := range p.cfg.State.ServicePortNames() {
		p.setEndpoints(name, len(p.cfg.State.Endpoints(name)))
	}
	p.updateLargeCluster()
}

func (p *Proxier) setEndpoints(name model.ServicePortName, n int) {
	p.total += n - p.endpoints[name]
	if n == 0 {
		delete(p.endpoints, name)
	} else {
		p.endpoints[name] = n
	}
}

// updateLargeCluster sets the renderer's large-cluster mode from the count and
// reports whether it changed.
func (p *Proxier) updateLargeCluster() bool {
	large := p.total > p.cfg.LargeClusterEndpoints
	if large == p.renderCfg.LargeCluster {
		return false
	}
	p.renderCfg.LargeCluster = large
	return true
}
