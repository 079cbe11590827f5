package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/config"
	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
	"github.com/kproxy/kproxy/internal/drift"
	"github.com/kproxy/kproxy/internal/health"
	"github.com/kproxy/kproxy/internal/inspect"
	"github.com/kproxy/kproxy/internal/metrics"
	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/nfacct"
	"github.com/kproxy/kproxy/internal/node"
	"github.com/kproxy/kproxy/internal/syncer"
	"github.com/kproxy/kproxy/internal/watch"
)

// daemon holds the parts of a running proxy; newDaemon builds them and run starts them.
type daemon struct {
	cfg *config.Config
	// nfacct is the iptables mode's packet counter client (nil in other modes).
	nfacct   nfacct.Interface
	nodeName string
	nodeRef  *v1.ObjectReference

	client      kubernetes.Interface
	broadcaster events.EventBroadcaster
	recorder    events.EventRecorderLogger

	nodes         *node.Manager
	healthServer  *health.ProxyHealthServer
	metricsServer *metrics.Server
	// stateAPI is what the state API (internal/inspect) and the status page
	// (internal/statuspage) serve.
	stateAPI *inspect.Source
	watcher  *watch.Watcher
	handlers *familyHandlers
	runner   *syncer.Runner
	closers  []func()
	// familyParts are the families' own parts (the iptables canary monitor), run
	// once other modes' leftovers are gone; trigger requests a sync.
	familyParts []func(ctx context.Context, trigger func()) error
	// precommits are the proxiers' Precommit, called until the informers synced.
	precommits []func()
	// cleanupOtherModes removes other modes' leftovers; run starts it with the
	// informers and waits for it before the first sync.
	cleanupOtherModes func(ctx context.Context)
	// fullSyncGC lowers the GC target during full syncs (process-wide, so owned here).
	fullSyncGC gcScope
	// startupWarnings are Warning Events about the configuration, recorded once the
	// event broadcaster runs (upstream records them before, and loses them).
	startupWarnings []startupWarning
}

// startupWarning is a Warning Event of the StartKubeProxy action.
type startupWarning struct{ reason, message string }

// metricsRegistry is the registry served at /metrics.
type metricsRegistry struct{ registry prometheus.Gatherer }

// errInitOnly ends Run successfully after --init-only's one-time setup.
var errInitOnly = errors.New("init-only: one-time setup done")

// newDaemon does the startup sequence of upstream's newProxyServer: it waits for this
// node's Node object (its IPs and podCIDRs shape the rules), applies the platform
// settings, removes other modes' leftovers, and builds one proxier per IP family.
func newDaemon(ctx context.Context, cfg *config.Config) (*daemon, error) {
	logger := klog.FromContext(ctx)
	d := &daemon{cfg: cfg}

	var counters metrics.RegisterOptions
	if cfg.Mode == config.ProxyModeIPTables {
		// The proxiers create the counters; a scrape before that (or without
		// nfacct in the kernel) omits the samples, as upstream's collectors do.
		d.nfacct = nfacct.New()
		counters.IPTablesCounters = func(_ context.Context, name string) (uint64, error) {
			c, err := d.nfacct.Get(name)
			return c.Packets, err
		}
	}
	if cfg.Mode == config.ProxyModeNFTables && cfg.FeatureGates.Enabled(config.KubeProxyNFTablesLocalhostNodePorts) {
		counters.NFTablesCounters = localhostNodePortCounters(ctx) // family.go
	}
	m, gatherer, err := newDaemonMetrics(cfg, counters)
	if err != nil {
		return nil, err
	}

	if d.nodeName, err = node.GetHostname(cfg.HostnameOverride); err != nil {
		return nil, err
	}
	d.nodeRef = watch.NodeRef(d.nodeName)
	if d.client, err = watch.NewClient(ctx, clientConnection(cfg)); err != nil {
		return nil, err
	}
	d.broadcaster, d.recorder = watch.NewEventBroadcaster(d.client)
	// The state API's families are filled in below, before Run starts the server.
	d.stateAPI = &inspect.Source{NodeName: d.nodeName, Mode: string(cfg.Mode)}
	d.healthServer, d.metricsServer = healthAndMetrics(cfg, m, &metricsRegistry{registry: gatherer}, d.stateAPI)

	// The node manager's informer lives as long as ctx: the daemon's whole life.
	d.nodes = node.NewManager(d.client, node.Config{
		NodeName:      d.nodeName,
		ResyncPeriod:  cfg.ConfigSyncPeriod,
		WatchPodCIDRs: cfg.DetectLocalMode == config.LocalModeNodeCIDR,
	})
	if err := d.nodes.Start(ctx); err != nil {
		return nil, err
	}
	if n := d.nodes.Node(); n != nil {
		d.healthServer.SyncNode(n)
	}
	bindAddress := ""
	if cfg.BindAddress.IsValid() {
		bindAddress = cfg.BindAddress.String()
	}
	primary, nodeIPs := node.DetectNodeIPs(ctx, d.nodes.NodeIPs(), bindAddress)
	podCIDRs := d.nodes.PodCIDRs()
	nodePortAddrs := expandNodePortAddresses(cfg.NodePortAddresses, nodeIPs)

	if err := platformSetup(ctx, cfg); err != nil {
		return nil, err
	}
	if err := checkBadConfig(cfg, primary, nodePortAddrs, podCIDRs); err != nil {
		logger.Error(err, "Kube-proxy configuration may be incomplete or incorrect")
	}
	backend, usableIPTables, err := backendFamilies(ctx, cfg.Mode)
	if err != nil {
		return nil, err
	}
	supported := node.SupportedFamilies(ctx, node.ProcProbe{}, backend)
	if err := supported.CheckPrimary(ctx, primary); err != nil {
		return nil, err
	}
	dualStack := supported.DualStack()
	if err, fatal := checkBadIPConfig(cfg, primary, dualStack, podCIDRs); err != nil {
		if fatal {
			return nil, fmt.Errorf("kube-proxy configuration is incorrect: %w", err)
		}
		logger.Error(err, "Kube-proxy configuration may be incomplete or incorrect")
	}

	if cfg.ModeDefaulted {
		// As upstream: an error line, and a Warning Event once the broadcaster runs.
		logger.Error(nil, defaultModeMessage)
		logger.Info(nftablesRecommendation)
		d.startupWarnings = append(d.startupWarnings, startupWarning{reason: "KubeProxyDefaultMode", message: defaultModeMessage})
	}
	if err := platformChecks(cfg.Mode); err != nil {
		return nil, fmt.Errorf("unable to create proxier: %w", err)
	}
	if cfg.Mode == config.ProxyModeIPVS {
		if err := checkIPVS(ctx, cfg); err != nil {
			return nil, err
		}
		logger.Info("Using ipvs Proxier")
		logger.Error(nil, ipvsDeprecationMessage)
		d.startupWarnings = append(d.startupWarnings, startupWarning{reason: "IPVSDeprecation", message: ipvsDeprecationMessage})
	}
	d.cleanupOtherModes = func(ctx context.Context) { cleanupOtherModes(ctx, cfg.Mode, m, primary) }

	families := []v1.IPFamily{primary}
	if dualStack {
		families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	}
	d.handlers = &familyHandlers{
		families: map[v1.IPFamily]*familyProxier{},
		primary:  primary,
		queued:   d.healthServer.QueuedUpdate,
		metrics:  m,
		now:      timeNow,
	}
	syncers := map[v1.IPFamily]syncer.Syncer{}
	for _, family := range families {
		state := model.NewState(family, d.nodeName)
		// As upstream's change tracker: objects changed before the proxy started would
		// report how long they waited for it, not network programming latency.
		state.IgnoreTriggerTimesBefore(timeNow())
		fp, err := newFamilyProxier(ctx, familyParams{
			cfg:              cfg,
			family:           family,
			nodeName:         d.nodeName,
			nodeIP:           nodeIPs[family],
			podCIDRs:         podCIDRs,
			nodePortAddrs:    nodePortAddrs,
			state:            state,
			metrics:          m.Family(family),
			health:           d.healthServer,
			recorder:         d.recorder,
			largeTransaction: d.fullSyncGC.enter,
			nfacct:           d.nfacct,
			iptables:         usableIPTables[family],
		})
		if err != nil {
			return nil, err
		}
		d.handlers.families[family] = &familyProxier{state: state, setServiceCIDR: fp.setServiceCIDRs}
		syncers[family] = fp.syncer
		d.closers = append(d.closers, fp.close)
		stateFamily := inspect.Family{State: state}
		if ip, ok := fp.syncer.(interface{ Inspectable() proxycore.Inspectable }); ok {
			stateFamily.Proxier = ip.Inspectable()
		}
		if v, ok := fp.syncer.(interface {
			Verify(context.Context) (*drift.Report, error)
		}); ok {
			stateFamily.Verify = v.Verify
		}
		d.stateAPI.Families = append(d.stateAPI.Families, stateFamily)
		if pc, ok := fp.syncer.(interface{ Precommit() }); ok {
			d.precommits = append(d.precommits, pc.Precommit)
		}
		if fp.run != nil {
			d.familyParts = append(d.familyParts, fp.run)
		}
	}
	if cfg.InitOnly {
		d.cleanupOtherModes(ctx)
		logger.Info("System initialized and --init-only specified")
		return nil, errInitOnly
	}

	if d.runner, err = newRunner(cfg, syncers, d.handlers.families[primary].state.Pending, m); err != nil {
		return nil, err
	}
	d.handlers.trigger = d.runner.Run

	d.watcher = watch.New(d.client, d.nodeName, cfg.ConfigSyncPeriod, watch.WithNodeInformer(d.nodes.NodeInformer()))
	d.watcher.AddServiceHandler(d.handlers)
	d.watcher.AddEndpointSliceHandler(d.handlers)
	d.watcher.AddNodeTopologyHandler(d.handlers)
	d.watcher.AddNodeHandler(nodeHealth{d.healthServer})
	if cfg.FeatureGates.Enabled(config.MultiCIDRServiceAllocator) {
		d.watcher.AddServiceCIDRHandler(d.handlers)
	}
	return d, nil
}

// nodeHealth feeds the Node to /healthz (deletion and autoscaler taint make it 503).
type nodeHealth struct{ hs *health.ProxyHealthServer }

func (n nodeHealth) OnNodeChange(node *v1.Node) { n.hs.SyncNode(node) }
func (n nodeHealth) OnNodeDelete(node *v1.Node) { n.hs.SyncNode(node) }
func (n nodeHealth) OnNodeSynced()              {}
