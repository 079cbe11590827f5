// Package metrics defines kube-proxy's kubeproxy_* Prometheus metrics and the
// metrics HTTP server (metricsBindAddress, default 127.0.0.1:10249).
//
// # Metrics contract
//
// New(reg) builds every metric of upstream kube-proxy v1.37.2
// (pkg/proxy/metrics/metrics.go) with the same name (subsystem "kubeproxy"), help,
// labels and buckets, without registering anything. Register(opts) then registers the
// core set plus the set of the active proxy mode, exactly as upstream's
// RegisterMetrics(mode) does; it may be called once. Metrics that are not registered
// can still be updated: they are simply not exposed. There is no package-level state:
// each Metrics owns its collectors and registers them only into the Registerer it was
// given.
//
// We use prometheus/client_golang directly rather than k8s.io/component-base/metrics.
// component-base's only visible effect on these metrics is the "[ALPHA] " prefix it
// adds to the help text of ALPHA metrics (all kube-proxy metrics are ALPHA), which
// we write into the help strings, so the exposition text is identical; in exchange we
// avoid its lazy-instantiation machinery and its global legacy registry, and the
// metrics can be registered into any prometheus.Registerer.
//
// Packet counters kept in the kernel (nfacct for iptables, named nftables counters
// for the localhost NodePort rejects) are exposed through collectors that read them
// at scrape time through reader functions the dataplane packages supply
// (RegisterOptions); this package never touches the kernel itself. As upstream, a
// missing reader means the metric is not registered, and a failing read omits the
// sample from that scrape.
//
// NewRegistry returns a registry that also carries the Go runtime and process
// collectors that upstream's legacy registry exposes.
//
// # Server contract
//
// Server serves, on one address:
//   - /metrics: the Gatherer passed in, in Prometheus text format;
//   - /proxyMode: the proxy mode as plain text;
//   - /healthz (and /healthz/ping): "ok", as upstream's generic healthz handler with
//     its only (ping) check;
//   - /configz: JSON object {"<ConfigzName>": <Config>} as component-base's configz;
//   - /flagz: "\n<component> flagz\n<warning>\n" then sorted "name: value" lines;
//   - /statusz: start time, uptime, Go and binary version, listed paths (text);
//   - /debug/pprof/* and /debug/flags/v only when profiling is enabled.
//
// Server.Run(ctx) listens and serves until ctx is cancelled, then shuts down
// gracefully. A listen or serve failure is returned when BindAddressHardFail is set
// (the daemon treats it as fatal, as upstream does); otherwise it is logged and the
// server retries every 5 seconds until ctx is cancelled, as upstream's
// wait.UntilWithContext loop does.
package metrics
