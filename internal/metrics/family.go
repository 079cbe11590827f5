package metrics

import (
	"time"
)

// FamilyMetrics updates the metrics of one IP family's proxier. A series is created
// on its first update, as upstream's proxiers do, so an unused metric shows no
// empty series. All methods are no-ops on a nil receiver.
type FamilyMetrics struct {
	m      *Metrics
	family string
}

// ObserveSync records one sync's duration (kubeproxy_sync_proxy_rules_duration_seconds).
func (f *FamilyMetrics) ObserveSync(d time.Duration) {
	if f != nil {
		f.m.SyncProxyRulesLatency.WithLabelValues(f.family).Observe(d.Seconds())
	}
}

// ObserveFullSync records a full sync's duration (..._full_proxy_rules_duration_seconds).
func (f *FamilyMetrics) ObserveFullSync(d time.Duration) {
	if f != nil {
		f.m.SyncFullProxyRulesLatency.WithLabelValues(f.family).Observe(d.Seconds())
	}
}

// ObservePartialSync records a partial sync's duration (..._partial_proxy_rules_duration_seconds).
func (f *FamilyMetrics) ObservePartialSync(d time.Duration) {
	if f != nil {
		f.m.SyncPartialProxyRulesLatency.WithLabelValues(f.family).Observe(d.Seconds())
	}
}

// SetLastSync sets kubeproxy_sync_proxy_rules_last_timestamp_seconds to t.
func (f *FamilyMetrics) SetLastSync(t time.Time) {
	if f != nil {
		f.m.SyncProxyRulesLastTimestamp.WithLabelValues(f.family).Set(unixSeconds(t))
	}
}

// SetLastQueued sets kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds to t.
func (f *FamilyMetrics) SetLastQueued(t time.Time) {
	if f != nil {
		f.m.SyncProxyRulesLastQueuedTimestamp.WithLabelValues(f.family).Set(unixSeconds(t))
	}
}

// ObserveNetworkProgramming records the time from an endpoints change (its
// EndpointSlice's last-change-trigger-time) to the sync that applied it.
func (f *FamilyMetrics) ObserveNetworkProgramming(d time.Duration) {
	if f != nil {
		f.m.NetworkProgrammingLatency.WithLabelValues(f.family).Observe(d.Seconds())
	}
}

// SetNoLocalEndpoints sets kubeproxy_sync_proxy_rules_no_local_endpoints_total for
// policy (TrafficPolicyInternal or TrafficPolicyExternal).
func (f *FamilyMetrics) SetNoLocalEndpoints(policy string, services int) {
	if f != nil {
		f.m.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues(policy, f.family).Set(float64(services))
	}
}

// IncIPTablesRestoreFailures counts a failed iptables-restore.
func (f *FamilyMetrics) IncIPTablesRestoreFailures() {
	if f != nil {
		f.m.IPTablesRestoreFailuresTotal.WithLabelValues(f.family).Inc()
	}
}

// IncIPTablesPartialRestoreFailures counts a failed partial iptables-restore (which
// falls back to a full one).
func (f *FamilyMetrics) IncIPTablesPartialRestoreFailures() {
	if f != nil {
		f.m.IPTablesPartialRestoreFailuresTotal.WithLabelValues(f.family).Inc()
	}
}

// SetIPTablesRules sets kubeproxy_sync_proxy_rules_iptables_total for table
// (TableFilter or TableNAT).
func (f *FamilyMetrics) SetIPTablesRules(table string, rules int) {
	if f != nil {
		f.m.IPTablesRulesTotal.WithLabelValues(table, f.family).Set(float64(rules))
	}
}

// SetIPTablesRulesLastSync sets kubeproxy_sync_proxy_rules_iptables_last for table.
func (f *FamilyMetrics) SetIPTablesRulesLastSync(table string, rules int) {
	if f != nil {
		f.m.IPTablesRulesLastSync.WithLabelValues(table, f.family).Set(float64(rules))
	}
}

// IncNFTablesSyncFailures counts a failed nftables transaction.
func (f *FamilyMetrics) IncNFTablesSyncFailures() {
	if f != nil {
		f.m.NFTablesSyncFailuresTotal.WithLabelValues(f.family).Inc()
	}
}

// IncNFTablesCleanupFailures counts a failed stale-chain cleanup.
func (f *FamilyMetrics) IncNFTablesCleanupFailures() {
	if f != nil {
		f.m.NFTablesCleanupFailuresTotal.WithLabelValues(f.family).Inc()
	}
}

// SetLocalhostNodePortListeners sets kubeproxy_nftables_localhost_nodeport_listeners.
func (f *FamilyMetrics) SetLocalhostNodePortListeners(n int) {
	if f != nil {
		f.m.LocalhostNodePortListeners.WithLabelValues(f.family).Set(float64(n))
	}
}

// IncLocalhostNodePortListenerFailures counts a localhost NodePort listener that
// could not be bound.
func (f *FamilyMetrics) IncLocalhostNodePortListenerFailures() {
	if f != nil {
		f.m.LocalhostNodePortListenerCreationFailuresTotal.WithLabelValues(f.family).Inc()
	}
}

// ObserveConntrackReconcile records one conntrack reconciliation's duration.
func (f *FamilyMetrics) ObserveConntrackReconcile(d time.Duration) {
	if f != nil {
		f.m.ReconcileConntrackFlowsLatency.WithLabelValues(f.family).Observe(d.Seconds())
	}
}

// AddConntrackDeletedEntries counts conntrack entries the reconciler deleted. A
// reconciliation that deleted none still creates the series (at 0), as upstream's
// Add(0) does.
func (f *FamilyMetrics) AddConntrackDeletedEntries(n int) {
	if f != nil && n >= 0 {
		f.m.ReconcileConntrackFlowsDeletedEntriesTotal.WithLabelValues(f.family).Add(float64(n))
	}
}

// unixSeconds is what prometheus' SetToCurrentTime stores, for an arbitrary t.
func unixSeconds(t time.Time) float64 {
	return float64(t.UnixNano()) / 1e9
}

// SetDriftObjects sets kubeproxy_kproxy_drift_objects: the differences between the
// kernel and what kproxy applied that the last comparison found.
func (f *FamilyMetrics) SetDriftObjects(n int) {
	if f != nil {
		f.m.DriftObjects.WithLabelValues(f.family).Set(float64(n))
	}
}

// IncDriftRepairs counts a full sync that repaired drift
// (kubeproxy_kproxy_drift_repairs_total).
func (f *FamilyMetrics) IncDriftRepairs() {
	if f != nil {
		f.m.DriftRepairsTotal.WithLabelValues(f.family).Inc()
	}
}
