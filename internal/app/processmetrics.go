package app

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	k8smetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	// client-go reports its rest client, workqueue, leader election and informer
	// metrics through hooks it keeps in process-wide variables
	// (client-go/tools/metrics.Register and its siblings, each settable once per
	// process). This import installs component-base's implementations, which
	// register rest_client_* into component-base's legacy registry when the first
	// client is built: upstream's main imports the same package. It lives here, in
	// the app layer, because the hooks belong to the whole process.
	_ "k8s.io/component-base/metrics/prometheus/clientgo"

	"github.com/kproxy/kproxy/internal/config"
	"github.com/kproxy/kproxy/internal/metrics"
)

// newDaemonMetrics builds and registers kube-proxy's metrics for cfg (the mode, the
// localhost NodePorts gate, the build info; readers carries the kernel counter
// readers) into a registry of the daemon's own, after the process-wide setup, and
// returns them with what /metrics serves: that registry merged with the
// process-wide one.
func newDaemonMetrics(cfg *config.Config, readers metrics.RegisterOptions) (*metrics.Metrics, prometheus.Gatherer, error) {
	shared := processMetrics(cfg)
	registry := metrics.NewRegistry()
	m := metrics.New(registry)
	// The reported version: --version=vX.Y.Z changes it, as upstream's build info.
	buildInfo := metrics.CurrentBuildInfo(cfg.Version)
	opts := readers
	opts.Mode = string(cfg.Mode)
	opts.LocalhostNodePorts = cfg.FeatureGates.Enabled(config.KubeProxyNFTablesLocalhostNodePorts)
	opts.BuildInfo = &buildInfo
	if err := m.Register(opts); err != nil {
		return nil, nil, fmt.Errorf("registering metrics: %w", err)
	}
	return m, metrics.NewGatherer(registry, shared), nil
}

// processMetrics does the process-wide part of the metrics setup, as upstream's
// command does, and returns the process-wide registry for metrics.NewGatherer.
//
// Everything here is process-wide by the libraries' design: component-base's legacy
// registry (which already holds the Go runtime and process collectors and its meta
// metrics, and gets rest_client_* from the import above), its show-hidden switch, and
// the kubernetes_feature_enabled gauge that featuregate's AddMetrics writes. So it is
// done from the app layer, before the API client is built, and not from library
// packages. Repeating it is harmless: SetShowHidden only ever switches on and
// AddMetrics sets one sample per gate.
func processMetrics(cfg *config.Config) prometheus.Gatherer {
	// --show-hidden-metrics-for-version (validated to be the previous minor) shows
	// the metrics deprecated in that release, as upstream's newProxyServer does: it
	// switches on component-base's process-wide show-hidden, which re-registers what
	// every component-base registry hid (see internal/metrics' package doc for which
	// version those registries judge by).
	if cfg.ShowHiddenMetricsForVersion != "" {
		k8smetrics.SetShowHidden()
	}
	// kubernetes_feature_enabled{name,stage}: one sample per known gate, 1 when
	// enabled, as upstream's utilfeature.DefaultMutableFeatureGate.AddMetrics().
	if fg, ok := cfg.FeatureGates.(interface{ AddMetrics() }); ok {
		fg.AddMetrics()
	}
	return legacyregistry.DefaultGatherer
}
