package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
)

const subsystem = "kubeproxy"

// Label names, as upstream.
const (
	labelIPFamily      = "ip_family"
	labelTable         = "table"
	labelTrafficPolicy = "traffic_policy"
	labelCode          = "code"
	labelLBType        = "lb_type"
	labelError         = "error"
)

// alpha marks help text as component-base does for ALPHA metrics.
func alpha(help string) string { return "[ALPHA] " + help }

// syncBuckets are upstream's ExponentialBuckets(0.001, 2, 15).
var syncBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)

// networkProgrammingBuckets are upstream's merged linear buckets:
// 0.25s, 0.5s, 1..59s, 60..115s by 5s, 120..300s by 30s.
func networkProgrammingBuckets() []float64 {
	var b []float64
	b = append(b, prometheus.LinearBuckets(0.25, 0.25, 2)...)
	b = append(b, prometheus.LinearBuckets(1, 1, 59)...)
	b = append(b, prometheus.LinearBuckets(60, 5, 12)...)
	b = append(b, prometheus.LinearBuckets(120, 30, 7)...)
	return b
}

// Metrics holds every kube-proxy metric. Fields are safe for concurrent use.
type Metrics struct {
	reg prometheus.Registerer

	// SyncProxyRulesLatency: kubeproxy_sync_proxy_rules_duration_seconds{ip_family}.
	SyncProxyRulesLatency *prometheus.HistogramVec
	// SyncFullProxyRulesLatency: kubeproxy_sync_full_proxy_rules_duration_seconds{ip_family}.
	SyncFullProxyRulesLatency *prometheus.HistogramVec
	// SyncPartialProxyRulesLatency: kubeproxy_sync_partial_proxy_rules_duration_seconds{ip_family}.
	SyncPartialProxyRulesLatency *prometheus.HistogramVec
	// SyncProxyRulesLastTimestamp: kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family}.
	SyncProxyRulesLastTimestamp *prometheus.GaugeVec
	// NetworkProgrammingLatency: kubeproxy_network_programming_duration_seconds{ip_family}.
	NetworkProgrammingLatency *prometheus.HistogramVec
	// EndpointChangesPending: kubeproxy_sync_proxy_rules_endpoint_changes_pending.
	EndpointChangesPending prometheus.Gauge
	// EndpointChangesTotal: kubeproxy_sync_proxy_rules_endpoint_changes_total.
	EndpointChangesTotal prometheus.Counter
	// ServiceChangesPending: kubeproxy_sync_proxy_rules_service_changes_pending.
	ServiceChangesPending prometheus.Gauge
	// ServiceChangesTotal: kubeproxy_sync_proxy_rules_service_changes_total.
	ServiceChangesTotal prometheus.Counter
	// IPTablesRestoreFailuresTotal: kubeproxy_sync_proxy_rules_iptables_restore_failures_total{ip_family}.
	IPTablesRestoreFailuresTotal *prometheus.CounterVec
	// IPTablesPartialRestoreFailuresTotal: kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total{ip_family}.
	IPTablesPartialRestoreFailuresTotal *prometheus.CounterVec
	// IPTablesRulesTotal: kubeproxy_sync_proxy_rules_iptables_total{table,ip_family}.
	IPTablesRulesTotal *prometheus.GaugeVec
	// IPTablesRulesLastSync: kubeproxy_sync_proxy_rules_iptables_last{table,ip_family}.
	IPTablesRulesLastSync *prometheus.GaugeVec
	// NFTablesSyncFailuresTotal: kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family}.
	NFTablesSyncFailuresTotal *prometheus.CounterVec
	// NFTablesCleanupFailuresTotal: kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total{ip_family}.
	NFTablesCleanupFailuresTotal *prometheus.CounterVec
	// ProxyHealthzTotal: kubeproxy_proxy_healthz_total{code}.
	ProxyHealthzTotal *prometheus.CounterVec
	// ProxyLivezTotal: kubeproxy_proxy_livez_total{code}.
	ProxyLivezTotal *prometheus.CounterVec
	// SyncProxyRulesLastQueuedTimestamp: kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family}.
	SyncProxyRulesLastQueuedTimestamp *prometheus.GaugeVec
	// SyncProxyRulesNoLocalEndpointsTotal: kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy,ip_family}
	// (a gauge despite its name, as upstream). traffic_policy is "internal" or "external".
	SyncProxyRulesNoLocalEndpointsTotal *prometheus.GaugeVec
	// WinKernelLB*Failure: kubeproxy_sync_proxy_rules_winkernel_lb_{create,update,delete}_failures_total
	// {ip_family,lb_type,error}; defined for name parity, registered only in kernelspace mode.
	WinKernelLBCreateFailure *prometheus.CounterVec
	WinKernelLBUpdateFailure *prometheus.CounterVec
	WinKernelLBDeleteFailure *prometheus.CounterVec
	// LocalhostNodePortListeners: kubeproxy_nftables_localhost_nodeport_listeners{ip_family}.
	LocalhostNodePortListeners *prometheus.GaugeVec
	// LocalhostNodePortListenerCreationFailuresTotal:
	// kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total{ip_family}.
	LocalhostNodePortListenerCreationFailuresTotal *prometheus.CounterVec
	// ReconcileConntrackFlowsLatency: kubeproxy_conntrack_reconciler_sync_duration_seconds{ip_family}.
	ReconcileConntrackFlowsLatency *prometheus.HistogramVec
	// ReconcileConntrackFlowsDeletedEntriesTotal: kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family}.
	ReconcileConntrackFlowsDeletedEntriesTotal *prometheus.CounterVec
	// DriftObjects: kubeproxy_kproxy_drift_objects{ip_family}, kproxy's own (not
	// upstream's): the differences between the kernel's rules and those kproxy
	// applied that the last comparison found (internal/drift).
	DriftObjects *prometheus.GaugeVec
	// DriftRepairsTotal: kubeproxy_kproxy_drift_repairs_total{ip_family}, kproxy's
	// own: full syncs that rewrote rules someone else had changed.
	DriftRepairsTotal *prometheus.CounterVec

	registered bool
}

func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: name, Help: alpha(help), Buckets: buckets,
	}, labels)
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: subsystem, Name: name, Help: alpha(help)}, labels)
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: subsystem, Name: name, Help: alpha(help)}, labels)
}

// New builds all metrics for registration into reg; it registers nothing (see
// Register). reg may be nil when the metrics are never exposed (tests, cleanup runs).
func New(reg prometheus.Registerer) *Metrics {
	return &Metrics{
		reg: reg,

		SyncProxyRulesLatency: histogramVec("sync_proxy_rules_duration_seconds",
			"SyncProxyRules latency in seconds", syncBuckets, labelIPFamily),
		SyncFullProxyRulesLatency: histogramVec("sync_full_proxy_rules_duration_seconds",
			"SyncProxyRules latency in seconds for full resyncs", syncBuckets, labelIPFamily),
		SyncPartialProxyRulesLatency: histogramVec("sync_partial_proxy_rules_duration_seconds",
			"SyncProxyRules latency in seconds for partial resyncs", syncBuckets, labelIPFamily),
		SyncProxyRulesLastTimestamp: gaugeVec("sync_proxy_rules_last_timestamp_seconds",
			"The last time proxy rules were successfully synced", labelIPFamily),
		NetworkProgrammingLatency: histogramVec("network_programming_duration_seconds",
			"In Cluster Network Programming Latency in seconds", networkProgrammingBuckets(), labelIPFamily),
		EndpointChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: subsystem,
			Name: "sync_proxy_rules_endpoint_changes_pending", Help: alpha("Pending proxy rules Endpoint changes")}),
		EndpointChangesTotal: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: subsystem,
			Name: "sync_proxy_rules_endpoint_changes_total", Help: alpha("Cumulative proxy rules Endpoint changes")}),
		ServiceChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: subsystem,
			Name: "sync_proxy_rules_service_changes_pending", Help: alpha("Pending proxy rules Service changes")}),
		ServiceChangesTotal: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: subsystem,
			Name: "sync_proxy_rules_service_changes_total", Help: alpha("Cumulative proxy rules Service changes")}),
		IPTablesRestoreFailuresTotal: counterVec("sync_proxy_rules_iptables_restore_failures_total",
			"Cumulative proxy iptables restore failures", labelIPFamily),
		IPTablesPartialRestoreFailuresTotal: counterVec("sync_proxy_rules_iptables_partial_restore_failures_total",
			"Cumulative proxy iptables partial restore failures", labelIPFamily),
		IPTablesRulesTotal: gaugeVec("sync_proxy_rules_iptables_total",
			"Total number of iptables rules owned by kube-proxy", labelTable, labelIPFamily),
		IPTablesRulesLastSync: gaugeVec("sync_proxy_rules_iptables_last",
			"Number of iptables rules written by kube-proxy in last sync", labelTable, labelIPFamily),
		NFTablesSyncFailuresTotal: counterVec("sync_proxy_rules_nftables_sync_failures_total",
			"Cumulative proxy nftables sync failures", labelIPFamily),
		NFTablesCleanupFailuresTotal: counterVec("sync_proxy_rules_nftables_cleanup_failures_total",
			"Cumulative proxy nftables cleanup failures", labelIPFamily),
		ProxyHealthzTotal: counterVec("proxy_healthz_total",
			"Cumulative proxy healthz HTTP status", labelCode),
		ProxyLivezTotal: counterVec("proxy_livez_total",
			"Cumulative proxy livez HTTP status", labelCode),
		SyncProxyRulesLastQueuedTimestamp: gaugeVec("sync_proxy_rules_last_queued_timestamp_seconds",
			"The last time a sync of proxy rules was queued", labelIPFamily),
		SyncProxyRulesNoLocalEndpointsTotal: gaugeVec("sync_proxy_rules_no_local_endpoints_total",
			"Number of services with a Local traffic policy and no endpoints", labelTrafficPolicy, labelIPFamily),
		WinKernelLBCreateFailure: counterVec("sync_proxy_rules_winkernel_lb_create_failures_total",
			"Cumulative proxy winkernel lb create failures", labelIPFamily, labelLBType, labelError),
		WinKernelLBUpdateFailure: counterVec("sync_proxy_rules_winkernel_lb_update_failures_total",
			"Cumulative proxy winkernel lb update failures", labelIPFamily, labelLBType, labelError),
		WinKernelLBDeleteFailure: counterVec("sync_proxy_rules_winkernel_lb_delete_failures_total",
			"Cumulative proxy winkernel lb delete failures", labelIPFamily, labelLBType, labelError),
		LocalhostNodePortListeners: gaugeVec("nftables_localhost_nodeport_listeners",
			"Number of active localhost NodePort userspace proxy listeners.", labelIPFamily),
		LocalhostNodePortListenerCreationFailuresTotal: counterVec("nftables_localhost_nodeport_listener_creation_failures_total",
			"Number of localhost NodePort userspace proxy listener creation failures.", labelIPFamily),
		ReconcileConntrackFlowsLatency: histogramVec("conntrack_reconciler_sync_duration_seconds",
			"ReconcileConntrackFlowsLatency latency in seconds", syncBuckets, labelIPFamily),
		ReconcileConntrackFlowsDeletedEntriesTotal: counterVec("conntrack_reconciler_deleted_entries_total",
			"Cumulative conntrack flows deleted by conntrack reconciler", labelIPFamily),
		DriftObjects: gaugeVec("kproxy_drift_objects",
			"Objects (tables, chains, rules, sets, elements) in which the kernel differs from what kproxy applied, at the last comparison", labelIPFamily),
		DriftRepairsTotal: counterVec("kproxy_drift_repairs_total",
			"Full syncs that rewrote the rules because the kernel differed from what kproxy applied", labelIPFamily),
	}
}

// Traffic policy label values of SyncProxyRulesNoLocalEndpointsTotal, as upstream.
const (
	TrafficPolicyInternal = "internal"
	TrafficPolicyExternal = "external"
)

// IPTables table label values of IPTablesRulesTotal / IPTablesRulesLastSync.
const (
	TableFilter = "filter"
	TableNAT    = "nat"
)

// Family returns the metrics of one IP family's proxier, with ip_family bound.
// Calling it on a nil *Metrics returns a nil *FamilyMetrics, whose methods do
// nothing, so proxiers under test may run without metrics.
func (m *Metrics) Family(family v1.IPFamily) *FamilyMetrics {
	if m == nil {
		return nil
	}
	return &FamilyMetrics{m: m, family: string(family)}
}
