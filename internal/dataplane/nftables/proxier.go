package nftables

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/conntrack"
	"github.com/kproxy/kproxy/internal/metrics"
	"github.com/kproxy/kproxy/internal/model"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// DefaultFullSyncPeriod is how often the whole table is rewritten even when nothing
// failed, as upstream does, to repair anything that changed the table behind our back.
const DefaultFullSyncPeriod = time.Hour

// HealthUpdater is told when all queued changes of a family are applied.
type HealthUpdater interface {
	Updated(family v1.IPFamily)
}

// ServiceHealth serves the healthCheckNodePorts of one family.
type ServiceHealth interface {
	SyncServices(map[types.NamespacedName]uint16) error
	SyncEndpoints(map[types.NamespacedName]int) error
}

// Config configures a Proxier. Required: Family, Render, NFT, State.
type Config struct {
	Family v1.IPFamily
	// Render is the renderer configuration; its ServiceCIDRs are replaced by
	// SetServiceCIDRs and its NodePortAddresses.IPs by NodePortIPs at each full sync.
	Render render.Config
	// NFT writes the kube-proxy table of Family.
	NFT knftables.Interface
	// State is the model of Family, fed by the informers.
	State *model.State
	// NodePortIPs returns this family's local addresses that serve NodePorts (when
	// Render.NodePortAddresses.All is false). nil keeps Render.NodePortAddresses.IPs.
	NodePortIPs func() ([]netip.Addr, error)
	// Conntrack clears stale UDP flows; nil disables the cleanup.
	Conntrack conntrack.Interface
	// Metrics of this family; nil records nothing.
	Metrics *metrics.FamilyMetrics
	// Health and ServiceHealth may be nil.
	Health        HealthUpdater
	ServiceHealth ServiceHealth
	// Recorder receives a Warning event on every Service or EndpointSlice whose data
	// was (partly) skipped; nil records none.
	Recorder events.EventRecorder
	// FullSyncPeriod defaults to DefaultFullSyncPeriod.
	FullSyncPeriod time.Duration
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
}

// Proxier programs one IP family; see the package documentation.
type Proxier struct {
	cfg Config

	mu           sync.Mutex
	serviceCIDRs []netip.Prefix
	cidrsChanged bool

	// Owned by the Sync goroutine.
	renderCfg    render.Config
	base         *render.Fragment
	applied      *render.State
	lastFullSync time.Time
	// pendingConntrack holds UDP cleanup work of syncs whose transaction failed.
	pendingConntrack   bool
	deletedUDP         []*model.ServicePort
	noLocalEndpoints   map[model.ServicePortName]noLocal
	healthPortsPending bool
}

type noLocal struct{ internal, external bool }

// New returns a Proxier; it touches nothing.
func New(cfg Config) (*Proxier, error) {
	if cfg.NFT == nil || cfg.State == nil {
		return nil, fmt.Errorf("nftables proxier for %s: NFT and State are required", cfg.Family)
	}
	if err := cfg.Render.Validate(); err != nil {
		return nil, fmt.Errorf("nftables proxier for %s: %w", cfg.Family, err)
	}
	if cfg.FullSyncPeriod <= 0 {
		cfg.FullSyncPeriod = DefaultFullSyncPeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Proxier{
		cfg:                cfg,
		renderCfg:          cfg.Render,
		serviceCIDRs:       cfg.Render.ServiceCIDRs,
		noLocalEndpoints:   map[model.ServicePortName]noLocal{},
		healthPortsPending: true,
	}, nil
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
func (p *Proxier) Sync(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("ipFamily", p.cfg.Family)
	start := p.cfg.Clock.Now()
	update := p.cfg.State.Commit()
	p.reportProblems(logger, update.Problems)

	baseChanged := p.refreshRenderConfig(ctx)
	full := p.applied == nil || start.Sub(p.lastFullSync) >= p.cfg.FullSyncPeriod
	if !full && !baseChanged && len(update.Changed) == 0 && len(update.Deleted) == 0 {
		p.afterSuccess(ctx, update, start, false)
		return nil
	}

	tx := p.cfg.NFT.NewTransaction()
	var commit func()
	if full {
		base := render.RenderBase(&p.renderCfg)
		st := render.NewState(&base, render.RenderServices(&p.renderCfg, slices.Collect(p.cfg.State.Views())))
		render.WriteFull(tx, st)
		commit = func() { p.base, p.applied, p.lastFullSync = &base, st, start }
	} else {
		updates := make(map[model.ServicePortName]*render.Fragment, len(update.Changed)+len(update.Deleted))
		for _, name := range update.Changed {
			if view := p.cfg.State.View(name); view != nil {
				frag := render.RenderService(&p.renderCfg, view)
				updates[name] = &frag
			}
		}
		for _, name := range update.Deleted {
			updates[name] = nil
		}
		var newBase *render.Fragment
		if baseChanged {
			b := render.RenderBase(&p.renderCfg)
			newBase = &b
		}
		plan := p.applied.Plan(tx, newBase, updates, render.PlanOptions{})
		commit = func() {
			p.applied.Commit(plan)
			if newBase != nil {
				p.base = newBase
			}
		}
	}

	if err := p.cfg.NFT.Run(ctx, tx); err != nil {
		// The kernel still holds the previous whole state. Forget what we think is
		// applied so that the retry rewrites the table from the model, and keep the
		// conntrack work of this update for the sync that succeeds.
		p.applied = nil
		p.keepConntrackWork(update)
		// This update's health check node port change is consumed: remember it.
		if update.HealthCheckNodePortsChanged {
			p.healthPortsPending = true
		}
		p.cfg.Metrics.IncNFTablesSyncFailures()
		return fmt.Errorf("nftables %s transaction (%d operations, full=%t): %w", p.cfg.Family, tx.NumOperations(), full, err)
	}
	commit()
	logger.V(2).Info("Synced nftables rules", "full", full, "changed", len(update.Changed), "deleted", len(update.Deleted),
		"operations", tx.NumOperations(), "elapsed", p.cfg.Clock.Since(start))
	p.afterSuccess(ctx, update, start, full)
	return nil
}

// reportProblems logs each piece of API data the model skipped and records a Warning
// event on its object, so that the owner of a Service sees why part of it is not
// programmed; everything else is programmed as usual.
func (p *Proxier) reportProblems(logger klog.Logger, problems []*model.DataError) {
	for _, problem := range problems {
		logger.Error(problem, "Skipping invalid Service or EndpointSlice data")
		if p.cfg.Recorder == nil {
			continue
		}
		ref := &v1.ObjectReference{Kind: problem.Kind, Namespace: problem.Object.Namespace, Name: problem.Object.Name}
		switch problem.Kind {
		case "Service":
			ref.APIVersion = "v1"
		case "EndpointSlice":
			ref.APIVersion = "discovery.k8s.io/v1"
		}
		p.cfg.Recorder.Eventf(ref, nil, v1.EventTypeWarning, "InvalidData", "SyncProxyRules",
			"kube-proxy (%s) skipped %s %q: %s", p.cfg.Family, problem.Field, problem.Value, problem.Reason)
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
	if p.cfg.NodePortIPs != nil && !p.renderCfg.NodePortAddresses.All {
		ips, err := p.cfg.NodePortIPs()
		if err != nil {
			klog.FromContext(ctx).Error(err, "Failed to list the node's addresses for NodePorts; keeping the previous ones", "ipFamily", p.cfg.Family)
		} else if !slices.Equal(ips, p.renderCfg.NodePortAddresses.IPs) {
			p.renderCfg.NodePortAddresses.IPs = ips
			changed = true
		}
	}
	return changed && p.applied != nil
}

func (p *Proxier) keepConntrackWork(update *model.Update) {
	// A deleted UDP Service needs the cleanup even when its EndpointSlices did not
	// change (yet): the model sets ConntrackCleanupRequired only for endpoint changes.
	if update.ConntrackCleanupRequired || len(update.DeletedUDPServicePorts) > 0 {
		p.pendingConntrack = true
	}
	p.deletedUDP = append(p.deletedUDP, update.DeletedUDPServicePorts...)
}

// afterSuccess does the follow-up work of a sync whose rules are in the kernel.
func (p *Proxier) afterSuccess(ctx context.Context, update *model.Update, start time.Time, full bool) {
	logger := klog.FromContext(ctx)
	p.keepConntrackWork(update)
	if p.pendingConntrack && p.cfg.Conntrack != nil {
		p.cleanConntrack(ctx)
	}

	if p.cfg.ServiceHealth != nil {
		if update.HealthCheckNodePortsChanged || p.healthPortsPending {
			if err := p.cfg.ServiceHealth.SyncServices(p.cfg.State.HealthCheckNodePorts()); err != nil {
				logger.Error(err, "Error syncing healthcheck services", "ipFamily", p.cfg.Family)
			} else {
				p.healthPortsPending = false
			}
		}
		if err := p.cfg.ServiceHealth.SyncEndpoints(p.cfg.State.LocalReadyEndpoints()); err != nil {
			logger.Error(err, "Error syncing healthcheck endpoints", "ipFamily", p.cfg.Family)
		}
	}

	p.recordNoLocalEndpoints(update, full)

	now := p.cfg.Clock.Now()
	elapsed := now.Sub(start)
	m := p.cfg.Metrics
	m.ObserveSync(elapsed)
	if full {
		m.ObserveFullSync(elapsed)
	} else {
		m.ObservePartialSync(elapsed)
	}
	m.SetLastSync(now)
	for _, times := range update.LastChangeTriggerTimes {
		for _, t := range times {
			m.ObserveNetworkProgramming(now.Sub(t))
		}
	}
	if p.cfg.Health != nil {
		p.cfg.Health.Updated(p.cfg.Family)
	}
}

// cleanConntrack removes UDP flows DNATed to endpoints that are no longer serving,
// and flows to UDP ServicePorts that were deleted.
func (p *Proxier) cleanConntrack(ctx context.Context) {
	start := p.cfg.Clock.Now()
	var services []conntrack.Service
	for view := range p.cfg.State.Views() {
		if view.Protocol != v1.ProtocolUDP {
			continue
		}
		services = append(services, conntrackService(view.ServicePort, p.cfg.State.Endpoints(view.Name)))
	}
	for _, deleted := range p.deletedUDP {
		if p.cfg.State.View(deleted.Name) == nil {
			services = append(services, conntrackService(deleted, nil))
		}
	}
	n, err := conntrack.CleanStaleEntries(ctx, p.cfg.Conntrack, p.cfg.Family, services)
	p.cfg.Metrics.ObserveConntrackReconcile(p.cfg.Clock.Since(start))
	p.cfg.Metrics.AddConntrackDeletedEntries(n)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Failed to clean stale UDP conntrack entries; will retry at the next sync", "ipFamily", p.cfg.Family)
		return
	}
	p.pendingConntrack = false
	p.deletedUDP = nil
}

func conntrackService(port *model.ServicePort, endpoints []*model.Endpoint) conntrack.Service {
	svc := conntrack.Service{
		Protocol:         port.Protocol,
		ClusterIP:        port.ClusterIP,
		Port:             port.Port,
		NodePort:         port.NodePort,
		ExternalIPs:      port.ExternalIPs,
		LoadBalancerVIPs: port.LoadBalancerVIPs,
	}
	for _, ep := range endpoints {
		if ep.Serving {
			svc.ServingEndpoints = append(svc.ServingEndpoints, ep.AddrPort())
		}
	}
	return svc
}

// recordNoLocalEndpoints keeps kubeproxy_sync_proxy_rules_no_local_endpoints_total
// current, looking only at what changed (everything on a full sync).
func (p *Proxier) recordNoLocalEndpoints(update *model.Update, full bool) {
	if p.cfg.Metrics == nil {
		return
	}
	set := func(view *model.ServicePortView) {
		var nl noLocal
		if view.HasAnyEndpoints && len(view.LocalEndpoints) == 0 {
			nl.internal = view.InternalPolicyLocal
			nl.external = view.ExternalPolicyLocal && view.ExternallyAccessible()
		}
		if nl == (noLocal{}) {
			delete(p.noLocalEndpoints, view.Name)
		} else {
			p.noLocalEndpoints[view.Name] = nl
		}
	}
	if full {
		clear(p.noLocalEndpoints)
		for view := range p.cfg.State.Views() {
			set(view)
		}
	} else {
		for _, name := range update.Changed {
			if view := p.cfg.State.View(name); view != nil {
				set(view)
			}
		}
		for _, name := range update.Deleted {
			delete(p.noLocalEndpoints, name)
		}
	}
	var internal, external int
	for _, nl := range p.noLocalEndpoints {
		if nl.internal {
			internal++
		}
		if nl.external {
			external++
		}
	}
	p.cfg.Metrics.SetNoLocalEndpoints(metrics.TrafficPolicyInternal, internal)
	p.cfg.Metrics.SetNoLocalEndpoints(metrics.TrafficPolicyExternal, external)
}
