package followup

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kproxy/kproxy/internal/conntrack"
	"github.com/kproxy/kproxy/internal/metrics"
	"github.com/kproxy/kproxy/internal/model"
)

// HealthUpdater is told when all queued changes of a family are applied.
type HealthUpdater interface {
	Updated(family v1.IPFamily)
}

// ServiceHealth serves the healthCheckNodePorts of one family.
type ServiceHealth interface {
	SyncServices(map[types.NamespacedName]uint16) error
	SyncEndpoints(map[types.NamespacedName]int) error
}

// Config configures a Work. Family and State are required; the rest may be nil.
type Config struct {
	Family v1.IPFamily
	// State is the model of Family, as the proxier commits it.
	State *model.State
	// Conntrack clears stale UDP flows; nil disables the cleanup.
	Conntrack     conntrack.Interface
	Metrics       *metrics.FamilyMetrics
	Health        HealthUpdater
	ServiceHealth ServiceHealth
	// Recorder receives a Warning event on every Service or EndpointSlice whose data
	// was (partly) skipped.
	Recorder events.EventRecorder
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
}

// Work is the follow-up state of one family's proxier. Not safe for concurrent use:
// the proxier calls it from its Sync goroutine.
type Work struct {
	cfg Config
	// pendingConntrack and deletedUDP hold UDP cleanup work of syncs whose rules did
	// not reach the kernel, or whose cleanup failed.
	pendingConntrack   bool
	deletedUDP         []*model.ServicePort
	noLocalEndpoints   map[model.ServicePortName]noLocal
	healthPortsPending bool
	// programmed sums up the network programming latencies observed since the last
	// TakeProgramming, for the proxier's time series (proxycore).
	programmed Programming
}

// Programming sums up the network programming latencies observed by one or more
// syncs: how long after an endpoints change its rules were in the kernel
// (kubeproxy_network_programming_duration_seconds).
type Programming struct {
	Count    int
	Sum, Max time.Duration
}

// Add counts one latency.
func (p *Programming) Add(d time.Duration) {
	p.Count++
	p.Sum += d
	p.Max = max(p.Max, d)
}

type noLocal struct{ internal, external bool }

// New returns a Work; it touches nothing.
func New(cfg Config) *Work {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Work{cfg: cfg, noLocalEndpoints: map[model.ServicePortName]noLocal{}, healthPortsPending: true}
}

// ReportProblems logs each piece of API data the model skipped and records a Warning
// event on its object, so that the owner of a Service sees why part of it is not
// programmed; everything else is programmed as usual.
func (w *Work) ReportProblems(logger klog.Logger, problems []*model.DataError) {
	for _, problem := range problems {
		logger.Error(problem, "Skipping invalid Service or EndpointSlice data")
		if w.cfg.Recorder == nil {
			continue
		}
		ref := &v1.ObjectReference{Kind: problem.Kind, Namespace: problem.Object.Namespace, Name: problem.Object.Name}
		switch problem.Kind {
		case "Service":
			ref.APIVersion = "v1"
		case "EndpointSlice":
			ref.APIVersion = "discovery.k8s.io/v1"
		}
		w.cfg.Recorder.Eventf(ref, nil, v1.EventTypeWarning, "InvalidData", "SyncProxyRules",
			"kube-proxy (%s) skipped %s %q: %s", w.cfg.Family, problem.Field, problem.Value, problem.Reason)
	}
}

// Failed keeps the work of an update whose rules did not reach the kernel for the
// sync that succeeds: its conntrack cleanup and its health check node port change.
func (w *Work) Failed(update *model.Update) {
	w.keepConntrackWork(update)
	if update.HealthCheckNodePortsChanged {
		w.healthPortsPending = true
	}
}

func (w *Work) keepConntrackWork(update *model.Update) {
	// A deleted UDP Service needs the cleanup even when its EndpointSlices did not
	// change (yet): the model sets ConntrackCleanupRequired only for endpoint changes.
	if update.ConntrackCleanupRequired || len(update.DeletedUDPServicePorts) > 0 {
		w.pendingConntrack = true
	}
	w.deletedUDP = append(w.deletedUDP, update.DeletedUDPServicePorts...)
}

// Succeeded does the follow-up work of a sync whose rules are in the kernel: stale
// UDP conntrack flows, service health, the no-local-endpoints gauges, the sync
// metrics (full tells which duration histogram gets the sync), and /healthz.
func (w *Work) Succeeded(ctx context.Context, update *model.Update, start time.Time, full bool) {
	logger := klog.FromContext(ctx)
	w.keepConntrackWork(update)
	if w.pendingConntrack && w.cfg.Conntrack != nil {
		w.cleanConntrack(ctx)
	}

	if w.cfg.ServiceHealth != nil {
		if update.HealthCheckNodePortsChanged || w.healthPortsPending {
			// A failure is retried at the next sync, even without a new change.
			err := w.cfg.ServiceHealth.SyncServices(w.cfg.State.HealthCheckNodePorts())
			if err != nil {
				logger.Error(err, "Error syncing healthcheck services", "ipFamily", w.cfg.Family)
			}
			w.healthPortsPending = err != nil
		}
		if err := w.cfg.ServiceHealth.SyncEndpoints(w.cfg.State.LocalReadyEndpoints()); err != nil {
			logger.Error(err, "Error syncing healthcheck endpoints", "ipFamily", w.cfg.Family)
		}
	}

	w.recordNoLocalEndpoints(update, full)

	now := w.cfg.Clock.Now()
	elapsed := now.Sub(start)
	m := w.cfg.Metrics
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
			w.programmed.Add(now.Sub(t))
		}
	}
	if w.cfg.Health != nil {
		w.cfg.Health.Updated(w.cfg.Family)
	}
}

// TakeProgramming returns the network programming latencies Succeeded observed
// since the last call, and forgets them.
func (w *Work) TakeProgramming() Programming {
	p := w.programmed
	w.programmed = Programming{}
	return p
}

// cleanConntrack removes UDP flows DNATed to endpoints that are no longer serving,
// and flows to UDP ServicePorts that were deleted.
func (w *Work) cleanConntrack(ctx context.Context) {
	start := w.cfg.Clock.Now()
	var services []conntrack.Service
	for view := range w.cfg.State.Views() {
		if view.Protocol != v1.ProtocolUDP {
			continue
		}
		services = append(services, conntrackService(view.ServicePort, w.cfg.State.Endpoints(view.Name)))
	}
	for _, deleted := range w.deletedUDP {
		if w.cfg.State.View(deleted.Name) == nil {
			services = append(services, conntrackService(deleted, nil))
		}
	}
	n, err := conntrack.CleanStaleEntries(ctx, w.cfg.Conntrack, w.cfg.Family, services)
	w.cfg.Metrics.ObserveConntrackReconcile(w.cfg.Clock.Since(start))
	w.cfg.Metrics.AddConntrackDeletedEntries(n)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Failed to clean stale UDP conntrack entries; will retry at the next sync", "ipFamily", w.cfg.Family)
		return
	}
	w.pendingConntrack = false
	w.deletedUDP = nil
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
func (w *Work) recordNoLocalEndpoints(update *model.Update, full bool) {
	if w.cfg.Metrics == nil {
		return
	}
	set := func(view *model.ServicePortView) {
		var nl noLocal
		if view.HasAnyEndpoints && len(view.LocalEndpoints) == 0 {
			nl.internal = view.InternalPolicyLocal
			nl.external = view.ExternalPolicyLocal && view.ExternallyAccessible()
		}
		if nl == (noLocal{}) {
			delete(w.noLocalEndpoints, view.Name)
		} else {
			w.noLocalEndpoints[view.Name] = nl
		}
	}
	if full {
		clear(w.noLocalEndpoints)
		for view := range w.cfg.State.Views() {
			set(view)
		}
	} else {
		for _, name := range update.Changed {
			if view := w.cfg.State.View(name); view != nil {
				set(view)
			}
		}
		for _, name := range update.Deleted {
			delete(w.noLocalEndpoints, name)
		}
	}
	var internal, external int
	for _, nl := range w.noLocalEndpoints {
		if nl.internal {
			internal++
		}
		if nl.external {
			external++
		}
	}
	w.cfg.Metrics.SetNoLocalEndpoints(metrics.TrafficPolicyInternal, internal)
	w.cfg.Metrics.SetNoLocalEndpoints(metrics.TrafficPolicyExternal, external)
}
