// Package metrics defines kube-proxy's kubeproxy_* Prometheus metrics and
// kubernetes_build_info, assembles what /metrics serves, and runs the metrics HTTP
// server (metricsBindAddress, default 127.0.0.1:10249).
//
// # Metrics contract
//
// New(reg) builds every metric of upstream kube-proxy v1.37.2
// (pkg/proxy/metrics/metrics.go) with the same name (subsystem "kubeproxy"), help,
// labels and buckets, without registering anything. Register(opts) then registers the
// core set plus the set of the active proxy mode, exactly as upstream's
// RegisterMetrics(mode) does, and kubernetes_build_info when opts.BuildInfo is set
// (CurrentBuildInfo: kproxy's version, the toolchain's VCS stamp); it may be called
// once. Metrics that are not registered can still be updated: they are simply not
// exposed. kproxy adds its own, named kubeproxy_kproxy_* so that they cannot collide
// with a future upstream metric: kubeproxy_kproxy_drift_objects and
// kubeproxy_kproxy_drift_repairs_total (per ip_family, in the nftables, iptables and
// ipvs modes; internal/drift). There is no package-level state: each Metrics owns its collectors and
// registers them only into the Registerer it was given.
//
// These families use prometheus/client_golang directly rather than
// k8s.io/component-base/metrics. component-base's visible effects on them are the
// "[ALPHA] " prefix it adds to the help text (all kube-proxy metrics are ALPHA), which
// we write into the help strings, so the exposition text is identical, and the
// hiding of deprecated metrics, which concerns none of them in v1.37. In exchange the
// metrics can be registered into any prometheus.Registerer and read back in tests.
// One visible consequence: component-base's registered_metrics_total counts only the
// metrics registered through component-base (the process-wide families below).
//
// Packet counters kept in the kernel (nfacct for iptables, named nftables counters
// for the localhost NodePort rejects) are exposed through collectors that read them
// at scrape time through reader functions the dataplane packages supply
// (RegisterOptions); this package never touches the kernel itself. As upstream, a
// missing reader means the metric is not registered, and a failing read omits the
// sample from that scrape.
//
// # What /metrics serves
//
// NewRegistry returns the registry for New, holding kube-proxy's own families only.
// NewGatherer(own, shared) merges it with shared, the process-wide registry that the
// component-base libraries register into (legacyregistry.DefaultGatherer, supplied by
// internal/app, which also does the process-wide setup those libraries require):
// the Go runtime (all runtime/metrics) and process collectors, client-go's
// rest_client_* (through component-base/metrics/prometheus/clientgo),
// kubernetes_feature_enabled{name,stage} (one sample per known gate, from
// featuregate's AddMetrics) and the registry's meta metrics (registered_metrics_total,
// disabled_metrics_total, hidden_metrics_total,
// cardinality_enforcement_unexpected_categorizations_total).
// --show-hidden-metrics-for-version calls component-base's SetShowHidden, as upstream,
// which re-registers the deprecated metrics its registries hid. (Those registries
// judge deprecation by component-base's own version variables, which only a build
// with -X k8s.io/component-base/version.gitVersion=... sets; kproxy's builds do not,
// so they hide nothing. No metric kube-proxy v1.37 links is deprecated, so the
// exposition is upstream's either way.)
// The result has upstream's families, types and label names in iptables and nftables
// mode (testdata/upstream-v1.37.2-*.families, captured from the real binary; the
// tests of this package and of internal/app compare against them), except twelve
// apiserver_* and aggregator_* families that upstream exposes only because it links
// k8s.io/apiserver packages that register them at init, and never updates.
// testdata/<mode>.families is the expected list of this package's own families
// (go test -update rewrites it); package metricstest reads and compares such lists.
//
// # Server contract
//
// Server serves, on one address:
//   - /metrics: the Gatherer passed in, in Prometheus text format;
//   - /metrics/slis: the healthz check's kubernetes_healthcheck* metrics (DELETE
//     resets them), as component-base's slis;
//   - /proxyMode: the proxy mode as plain text;
//   - /healthz (and /healthz/ping): "ok", as upstream's generic healthz handler with
//     its only (ping) check;
//   - /configz: JSON object {"<ConfigzName>": <Config>} as component-base's configz;
//   - /flagz: "\n<component> flagz\n<warning>\n" then sorted "name: value" lines;
//   - /statusz: start time, uptime, Go and binary version, listed paths (text);
//   - only when profiling is enabled (unlisted, as upstream): /debug/pprof/*, and with
//     a SetVerbosity, /debug/flags and /debug/flags/ (an HTML index listing "v") and
//     /debug/flags/v, which passes a PUT body verbatim to SetVerbosity and answers its
//     message (200) or error (400) as a text/plain line, and any other method with
//     406, as apiserver's routes.DebugFlags and StringFlagPutHandler;
//   - the Unlisted handlers (kproxy's state API, internal/inspect), by pattern, left
//     out of /statusz's list so that it lists what upstream serves.
//
// Server.Run(ctx) listens and serves until ctx is cancelled, then shuts down
// gracefully. A listen or serve failure is returned when BindAddressHardFail is set
// (the daemon treats it as fatal, as upstream does); otherwise it is logged and the
// server retries every 5 seconds until ctx is cancelled, as upstream's
// wait.UntilWithContext loop does.
package metrics
