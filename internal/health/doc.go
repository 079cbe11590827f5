// Package health implements kube-proxy's two health-check servers.
//
// # ProxyHealthServer (healthzBindAddress, default 0.0.0.0:10256)
//
// Proxiers report, per IP family, QueuedUpdate(family) when a Service or
// EndpointSlice change arrives that they have not yet applied, and Updated(family)
// after a successful sync. A family is unhealthy when its oldest unapplied update is
// at least healthTimeout old (the daemon passes 2 * syncPeriod, as upstream). A
// family that never called Updated is not considered at all (it is starting up), as
// upstream.
//
//   - GET /livez: 200 when every family is healthy, 503 otherwise.
//   - GET /healthz: as /livez, and also 503 when the node is not eligible: no node
//     seen yet (SyncNode never called), a DeletionTimestamp set, or the
//     "ToBeDeletedByClusterAutoscaler" taint.
//
// Both answer with upstream's JSON, field for field:
//
//	{"lastUpdated":T,"currentTime":T,"nodeEligible":B,"healthy":B,"status":{"IPv4":{"lastUpdated":T,"healthy":B}}}
//
// where nodeEligible appears only in /healthz, status is omitted when no family has
// updated, and lastUpdated is the current time when healthy (upstream keeps that
// for compatibility with older releases) and the latest Updated time otherwise.
// Each answer increments kubeproxy_proxy_healthz_total / kubeproxy_proxy_livez_total
// with its code label.
//
// Run(ctx) listens and serves until ctx is cancelled (then returns nil after a
// graceful shutdown). On a listen/serve failure it returns the error when
// BindAddressHardFail is set (the daemon exits, and may record the
// FailedToStartProxierHealthcheck event), and otherwise logs it and retries every 5s,
// as upstream's serveHealthz.
//
// # ServiceHealthServer (healthCheckNodePort of externalTrafficPolicy=Local services)
//
// One ServiceHealthServer serves one IP family. SyncServices(map[name]port) makes
// that set of services active: listeners of services that left the set or changed
// port are closed, new ones are opened on every configured node address (the
// addresses selected by nodePortAddresses; none means the family's wildcard
// address), and unchanged ones are left alone. A port that cannot be opened is
// logged, reported with a Warning Event "FailedToStartServiceHealthcheck" on the
// Service (when a recorder is given), and retried on the next SyncServices; it is not
// an error, as upstream. SyncEndpoints(map[name]count) sets the local endpoint
// counts; services missing from the map get 0.
//
// Each listener answers any path with
//
//	{
//		"service": {
//			"namespace": "ns",
//			"name": "name"
//		},
//		"localEndpoints": N,
//		"serviceProxyHealthy": B
//	}
//
// (tab-indented, exactly upstream's bytes), header X-Load-Balancing-Endpoint-Weight: N
// (always set, as upstream), code 200 when N > 0 and the proxy is healthy (the
// ProxyHealthServer's Health().Healthy, which ignores node eligibility), 503
// otherwise.
//
// Listeners are opened through the Listener interface (net.ListenConfig by default)
// so tests can observe and fail them; all times come from an injected clock.
package health
