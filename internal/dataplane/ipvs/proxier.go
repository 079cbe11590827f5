package ipvs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/ipvs"
	"github.com/kproxy/kproxy/internal/ipvs/dummy"
	"github.com/kproxy/kproxy/internal/model"
	render "github.com/kproxy/kproxy/internal/render/ipvs"
)

// DefaultFullSyncPeriod is how often a sync lists the kernel and repairs what
// differs even when nothing failed (upstream's ipvs proxier lists it at every sync).
const DefaultFullSyncPeriod = time.Hour

// Config configures a Proxier. Required: Family, State (proxycore.Config), Render,
// IPVS, IPSet, Link, IPT.
type Config struct {
	proxycore.Config
	// Render is the renderer configuration; its HostAddresses are read from Link
	// and its NodePortAddresses.IPs from NodePortIPs at each sync.
	Render render.Config
	IPVS   ipvs.Interface
	IPSet  ipset.Interface
	Link   dummy.Interface
	IPT    iptables.Interface
	// Graceful removes real servers; nil deletes them at once.
	Graceful *ipvs.GracefulTermination
	// ExcludeCIDRs are ipvs.excludeCIDRs: virtual servers there are never deleted.
	ExcludeCIDRs []netip.Prefix
}

// Proxier programs one IP family; see the package documentation.
type Proxier struct {
	// Common: Inspectable, Precommit and RequestFullSync, as every mode's.
	proxycore.Common
	cfg Config

	// Owned by the Sync goroutine.
	core      *proxycore.Core
	renderCfg render.Config
	frags     map[model.ServicePortName]*render.Fragment
	// applied is what the kernel holds after the last successful sync; nil
	// before the first and after a failure (the next sync is full).
	applied *render.Desired
	// rules is the restore input last written.
	rules []byte
	buf   bytes.Buffer
}

// New returns a Proxier; it touches nothing.
func New(cfg Config) (*Proxier, error) {
	switch {
	case cfg.IPVS == nil, cfg.IPSet == nil, cfg.Link == nil, cfg.IPT == nil:
		return nil, fmt.Errorf("ipvs proxier for %s: IPVS, IPSet, Link and IPT are required", cfg.Family)
	case cfg.Render.Family != cfg.Family:
		return nil, fmt.Errorf("ipvs proxier for %s: renderer configured for %q", cfg.Family, cfg.Render.Family)
	}
	if err := cfg.Render.Validate(); err != nil {
		return nil, fmt.Errorf("ipvs proxier for %s: %w", cfg.Family, err)
	}
	core, err := proxycore.New("ipvs", &cfg.Config, DefaultFullSyncPeriod)
	if err != nil {
		return nil, err
	}
	return &Proxier{Common: core.Common(), cfg: cfg, core: core, renderCfg: cfg.Render, frags: map[model.ServicePortName]*render.Fragment{}}, nil
}

// publish records, for the state API, the settings this sync wrote with.
func (p *Proxier) publish() {
	cfg := p.renderCfg
	p.core.Publish(proxycore.Published{
		NodePortAddresses: cfg.NodePortAddresses, LocalDetector: cfg.LocalDetector,
		Describe: func(v *model.ServicePortView) []string {
			return render.RenderService(&cfg, v).Describe(cfg.Family)
		},
	})
}

// Sync applies every change committed to the model since the last successful Sync.
// It reports whether it wrote anything to the kernel.
func (p *Proxier) Sync(ctx context.Context) (bool, error) {
	p.core.LockForSync()
	defer p.core.UnlockSync()
	logger, start, update := p.core.Begin(ctx)
	ctx = klog.NewContext(ctx, logger)
	full := p.applied == nil || p.core.TakeFullSyncRequest() || p.core.FullSyncDue(start)
	addrsChanged := p.refreshAddresses(ctx)
	if full || addrsChanged {
		clear(p.frags)
		for v := range p.cfg.State.Views() {
			p.frags[v.Name] = render.RenderService(&p.renderCfg, v)
		}
	} else {
		for _, n := range update.Deleted {
			delete(p.frags, n)
		}
		for _, n := range update.Changed {
			if v := p.cfg.State.View(n); v != nil {
				p.frags[n] = render.RenderService(&p.renderCfg, v)
			}
		}
		if len(update.Changed) == 0 && len(update.Deleted) == 0 {
			p.core.FollowUp.Succeeded(ctx, update, start, false)
			p.core.Record(start, update, false, false, 0, nil)
			return false, nil
		}
	}
	desired := render.Assemble(&p.renderCfg, slices.Collect(maps.Values(p.frags)))
	var prev *render.Desired
	if !full {
		prev = p.applied
	}
	w := &writer{p: p, ctx: ctx}
	w.apply(prev, desired)
	if w.ops > 0 {
		p.core.CountWrite()
	}
	if err := w.err(); err != nil {
		p.applied, p.rules = nil, nil
		p.core.FollowUp.Failed(update)
		err = fmt.Errorf("ipvs %s sync (full=%t): %w", p.cfg.Family, full, err)
		p.core.Record(start, update, full, w.ops > 0, w.ops, err)
		return w.ops > 0, err
	}
	p.applied = desired
	if full {
		p.core.FullSyncDone(start)
	}
	logger.V(2).Info("Synced ipvs rules", "full", full, "changed", len(update.Changed), "deleted", len(update.Deleted),
		"virtualServers", len(desired.Services), "operations", w.ops, "elapsed", p.cfg.Clock.Since(start))
	p.core.FollowUp.Succeeded(ctx, update, start, full)
	if w.ops > 0 {
		p.publish()
	}
	p.core.Record(start, update, full, w.ops > 0, w.ops, nil)
	return w.ops > 0, nil
}

// refreshAddresses reads the node's addresses of this family (upstream reads them
// at every sync: they serve NodePorts with nodePortAddresses unset, and
// externalIPs among them are not bound to kube-ipvs0) and the NodePort addresses;
// it reports whether either changed.
func (p *Proxier) refreshAddresses(ctx context.Context) bool {
	changed := p.core.RefreshNodePortIPs(ctx, &p.renderCfg.NodePortAddresses)
	all, err := p.cfg.Link.NodeAddresses()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Failed to list the node's addresses; keeping the last ones")
		return changed
	}
	var host []netip.Addr
	for _, a := range all {
		if model.InFamily(a, p.cfg.Family) && !a.IsLoopback() && !a.IsLinkLocalUnicast() {
			host = append(host, a)
		}
	}
	slices.SortFunc(host, netip.Addr.Compare)
	host = slices.Compact(host)
	if slices.Equal(host, p.renderCfg.HostAddresses) {
		return changed
	}
	p.renderCfg.HostAddresses = host
	return true
}

// excluded reports whether a virtual server at a must never be deleted.
func (p *Proxier) excluded(a netip.Addr) bool {
	for _, c := range p.cfg.ExcludeCIDRs {
		if c.Contains(a) {
			return true
		}
	}
	return false
}

// inTermination reports whether a real server is in graceful termination.
func (p *Proxier) inTermination(k ipvs.Key, ap netip.AddrPort) bool {
	return p.cfg.Graceful != nil && p.cfg.Graceful.InTerminationList(k, ap)
}

// errRestore marks a failed iptables-restore among a sync's errors.
var errRestore = errors.New("iptables-restore failed")
