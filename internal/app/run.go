package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/component-base/logs"
	zpagesfeatures "k8s.io/component-base/zpages/features"
	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/cleanup"
	"github.com/kproxy/kproxy/internal/config"
	"github.com/kproxy/kproxy/internal/conntrack"
	"github.com/kproxy/kproxy/internal/health"
	"github.com/kproxy/kproxy/internal/inspect"
	"github.com/kproxy/kproxy/internal/metrics"
	"github.com/kproxy/kproxy/internal/statuspage"
	"github.com/kproxy/kproxy/internal/syncer"
	"github.com/kproxy/kproxy/internal/sysctl"
	"github.com/kproxy/kproxy/internal/watch"
)

// Run is the kube-proxy daemon (the RunFunc of NewCommand). It returns when ctx is
// done (nil), or with the error that stopped it: a part that failed for good, or the
// node's IPs changing (the process exits and is restarted, as upstream's does).
func Run(ctx context.Context, cfg *config.Config) error {
	logger := klog.FromContext(ctx)
	logger.Info("Version info", "version", cfg.Version)
	logger.Info("Golang settings", "GOGC", os.Getenv("GOGC"), "GOMAXPROCS", os.Getenv("GOMAXPROCS"), "GOTRACEBACK", os.Getenv("GOTRACEBACK"))

	// client-go reads its feature gates (WatchListClient, ...) from a process-wide
	// variable: install this command's gate set there, as upstream does, before any
	// client exists.
	clientfeatures.ReplaceFeatureGates(config.ClientGoGates{Gates: cfg.FeatureGates})

	if cfg.Cleanup {
		if err := cleanup.All(ctx, cleanup.Deps{}); err != nil {
			return fmt.Errorf("cleanup: %w", err)
		}
		logger.Info("Removed the rules of every proxy mode")
		return nil
	}

	d, err := newDaemon(ctx, cfg)
	if errors.Is(err, errInitOnly) {
		return nil
	}
	if err != nil {
		return err
	}
	return d.run(ctx)
}

// precommitInterval is how often the model commits what the informers delivered
// while they list (see awaitSynced).
const precommitInterval = 50 * time.Millisecond

// awaitSynced waits until the informers have listed everything (started closed),
// and meanwhile has the proxiers commit what arrived to their models every
// precommitInterval (Precommit): at 10,000 Services the conversion then mostly
// overlaps the API server's streaming instead of delaying the first sync. It runs
// on the goroutine that then runs the sync loop, as Precommit requires. It
// reports false when ctx ended first.
func (d *daemon) awaitSynced(ctx context.Context, started <-chan struct{}) bool {
	tick := time.NewTicker(precommitInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-started:
			return true
		case <-tick.C:
			for _, precommit := range d.precommits {
				precommit()
			}
		}
	}
}

// platformSetup applies the process and kernel settings that upstream applies before
// creating its proxier. As upstream, a conntrack setting that cannot be applied fails
// the start; the OOM score is best effort.
func platformSetup(ctx context.Context, cfg *config.Config) error {
	if cfg.OOMScoreAdj != nil {
		sysctl.ApplyOOMScoreAdj(ctx, sysctl.SelfOOMScoreAdj{}, int(*cfg.OOMScoreAdj))
	}
	ct := conntrack.SysctlConfig{
		TCPBeLiberal:     cfg.Conntrack.TCPBeLiberal,
		UDPTimeout:       cfg.Conntrack.UDPTimeout,
		UDPStreamTimeout: cfg.Conntrack.UDPStreamTimeout,
	}
	if cfg.Conntrack.MaxPerCore != nil {
		ct.MaxPerCore = *cfg.Conntrack.MaxPerCore
	}
	if cfg.Conntrack.Min != nil {
		ct.Min = *cfg.Conntrack.Min
	}
	if cfg.Conntrack.TCPEstablishedTimeout != nil {
		ct.TCPEstablishedTimeout = *cfg.Conntrack.TCPEstablishedTimeout
	}
	if cfg.Conntrack.TCPCloseWaitTimeout != nil {
		ct.TCPCloseWaitTimeout = *cfg.Conntrack.TCPCloseWaitTimeout
	}
	if err := conntrack.ApplySysctls(ctx, conntrack.HostSysctlEnv(), ct); err != nil {
		return fmt.Errorf("could not set conntrack parameters from kube-proxy configuration: %w", err)
	}
	return nil
}

// run starts every part of the daemon under one errgroup: the first part to fail
// stops the others.
func (d *daemon) run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)

	d.broadcaster.StartRecordingToSink(ctx.Done())
	defer d.broadcaster.Shutdown()
	for _, w := range d.startupWarnings {
		d.recorder.Eventf(d.nodeRef, nil, v1.EventTypeWarning, w.reason, "StartKubeProxy", w.message)
	}

	g.Go(func() error {
		err := d.healthServer.Run(ctx)
		if err != nil {
			d.recorder.Eventf(d.nodeRef, nil, v1.EventTypeWarning, "FailedToStartProxierHealthcheck", "StartKubeProxy", err.Error())
		}
		return err
	})
	g.Go(func() error {
		err := d.metricsServer.Run(ctx)
		if err != nil {
			d.recorder.Eventf(d.nodeRef, nil, v1.EventTypeWarning, "FailedToStartMetricServer", "StartKubeProxy", err.Error())
		}
		return err
	})
	g.Go(func() error { return d.nodes.Run(ctx) })
	if d.cfg.ConfigFile != "" {
		// As upstream, a changed configuration file ends the process so that it is
		// restarted with the new configuration.
		g.Go(func() error { return config.WatchFile(ctx, d.cfg.ConfigFile) })
	}

	started := make(chan struct{})
	d.handlers.onSynced = func() { close(started) }
	g.Go(func() error { return d.watcher.Run(ctx) })
	cleanedUp := make(chan struct{})
	g.Go(func() error {
		defer close(cleanedUp)
		d.cleanupOtherModes(ctx)
		return nil
	})
	for _, part := range d.familyParts {
		g.Go(func() error {
			// No rule is written before other modes' leftovers are gone.
			select {
			case <-ctx.Done():
				return nil
			case <-cleanedUp:
			}
			return part(ctx, d.runner.Run)
		})
	}
	g.Go(func() error {
		if !d.awaitSynced(ctx, started) {
			return nil
		}
		// No rule is written before other modes' leftovers are gone (upstream
		// removes them before it creates its proxier).
		select {
		case <-ctx.Done():
			return nil
		case <-cleanedUp:
		}
		logger.Info("Services and EndpointSlices synced; starting the sync loop")
		d.runner.Run()
		return d.runner.Loop(ctx)
	})
	for _, closeFn := range d.closers {
		defer closeFn()
	}

	// Birth cry once the parts are started, as upstream.
	d.recorder.Eventf(d.nodeRef, nil, v1.EventTypeNormal, "Starting", "StartKubeProxy", "")

	err := g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// newRunner builds the bounded-frequency runner over every family's proxier. After
// each sync the pending-change gauges show what arrived meanwhile.
func newRunner(cfg *config.Config, syncers map[v1.IPFamily]syncer.Syncer, pending func() (services, endpoints int), m *metrics.Metrics) (*syncer.Runner, error) {
	families := syncer.NewFamilies(syncers)
	sync := func(ctx context.Context) (bool, error) {
		wrote, err := families.Sync(ctx)
		m.SetPendingChanges(pending())
		return wrote, err
	}
	// minSyncPeriod bounds how often rules are written (a sync that writes nothing
	// does not delay the next, see internal/syncer); a failed sync is retried with
	// back-off, syncer.FirstRetryDelay (or minSyncPeriod, if longer) doubling with
	// each consecutive failure up to syncPeriod (upstream's fixed retry interval);
	// and rules are rewritten at least every hour as upstream.
	return syncer.NewRunner("sync-runner", sync, cfg.MinSyncPeriod, cfg.SyncPeriod, time.Hour)
}

// healthAndMetrics builds the two HTTP servers. With profiling on, the metrics
// server also takes PUT /debug/flags/v, which sets the process's log verbosity
// through component-base's logs.GlogSetter, as upstream's serveMetrics. stateAPI,
// when not nil, is served as kproxy's state API under inspect.PathPrefix and as its
// status page under statuspage.Path (around it; the more specific state API
// pattern wins).
func healthAndMetrics(cfg *config.Config, m *metrics.Metrics, gatherer *metricsRegistry, stateAPI *inspect.Source) (*health.ProxyHealthServer, *metrics.Server) {
	hs := health.NewProxyHealthServer(health.ProxyHealthConfig{
		BindAddress:         cfg.HealthzBindAddress,
		HealthTimeout:       2 * cfg.SyncPeriod,
		BindAddressHardFail: cfg.BindAddressHardFail,
		Metrics:             m,
	})
	var unlisted map[string]http.Handler
	if stateAPI != nil {
		unlisted = map[string]http.Handler{
			inspect.PathPrefix: inspect.Handler(stateAPI),
			statuspage.Path:    statuspage.Handler(stateAPI, nil),
		}
	}
	ms := metrics.NewServer(metrics.ServerConfig{
		BindAddress:         cfg.MetricsBindAddress,
		BindAddressHardFail: cfg.BindAddressHardFail,
		ProxyMode:           string(cfg.Mode),
		Gatherer:            gatherer.registry,
		Config:              cfg.V1Alpha1,
		Flags:               flagzIfEnabled(cfg),
		DisableStatusz:      !cfg.FeatureGates.Enabled(zpagesfeatures.ComponentStatusz),
		BinaryVersion:       cfg.Version,
		EnableProfiling:     cfg.EnableProfiling,
		SetVerbosity:        logs.GlogSetter,
		Unlisted:            unlisted,
	})
	return hs, ms
}

// flagz serves the flags for /flagz.
type flagz map[string]string

// flagzIfEnabled is /flagz's reader, nil (not served) with ComponentFlagz off.
func flagzIfEnabled(cfg *config.Config) metrics.FlagReader {
	if !cfg.FeatureGates.Enabled(zpagesfeatures.ComponentFlagz) {
		return nil
	}
	return flagz(cfg.Flags)
}

func (f flagz) GetFlagz() map[string]string { return f }

// clientConnection maps the configuration to the watch package's.
func clientConnection(cfg *config.Config) watch.ClientConnection {
	return watch.ClientConnection{
		Kubeconfig:         cfg.ClientConnection.Kubeconfig,
		Master:             cfg.Master,
		ContentType:        cfg.ClientConnection.ContentType,
		AcceptContentTypes: cfg.ClientConnection.AcceptContentTypes,
		QPS:                cfg.ClientConnection.QPS,
		Burst:              cfg.ClientConnection.Burst,
	}
}
