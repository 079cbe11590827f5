package metrics

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Proxy modes, spelled as in KubeProxyConfiguration.mode.
const (
	ModeIPTables    = "iptables"
	ModeIPVS        = "ipvs"
	ModeNFTables    = "nftables"
	ModeKernelspace = "kernelspace"
)

// RegisterOptions selects what Register exposes.
type RegisterOptions struct {
	// Mode is the active proxy mode (Mode* constants).
	Mode string
	// LocalhostNodePorts is the KubeProxyNFTablesLocalhostNodePorts feature gate
	// (nftables mode only).
	LocalhostNodePorts bool

	// IPTablesCounters reads named nfacct packet counters (iptables mode). nil (for
	// instance when the nfacct netlink subsystem is unavailable) leaves
	// kubeproxy_iptables_ct_state_invalid_dropped_packets_total and
	// kubeproxy_iptables_localhost_nodeports_accepted_packets_total unregistered, as
	// upstream does when it cannot create its nfacct client.
	IPTablesCounters NFAcctReader
	// NFTablesCounters lists the named counters of the kube-proxy table of each
	// family (nftables mode with LocalhostNodePorts). nil leaves
	// kubeproxy_nftables_localhost_nodeport_rejected_packets_total unregistered.
	NFTablesCounters NFTablesCounterLister

	// BuildInfo is reported by kubernetes_build_info (see CurrentBuildInfo); nil
	// leaves it unregistered.
	BuildInfo *BuildInfo
}

// Register registers the core metrics and those of opts.Mode into the Registerer
// given to New, as upstream's RegisterMetrics does, and kubernetes_build_info when
// opts.BuildInfo is set. It may succeed only once.
func (m *Metrics) Register(opts RegisterOptions) error {
	if m.registered {
		return errors.New("metrics already registered")
	}
	if m.reg == nil {
		return errors.New("metrics have no registerer")
	}
	cs := []prometheus.Collector{
		m.SyncProxyRulesLatency,
		m.SyncProxyRulesLastQueuedTimestamp,
		m.SyncProxyRulesLastTimestamp,
		m.EndpointChangesPending,
		m.EndpointChangesTotal,
		m.ServiceChangesPending,
		m.ServiceChangesTotal,
		m.ProxyHealthzTotal,
		m.ProxyLivezTotal,
		m.NetworkProgrammingLatency,
		m.SyncProxyRulesNoLocalEndpointsTotal,
	}
	switch opts.Mode {
	case ModeIPTables:
		if opts.IPTablesCounters != nil {
			cs = append(cs,
				newNFAcctCollector(opts.IPTablesCounters, IPTablesCTStateInvalidDroppedNFAcctCounter, ctStateInvalidDroppedDesc),
				newNFAcctCollector(opts.IPTablesCounters, LocalhostNodePortAcceptedNFAcctCounter, localhostNodePortsAcceptedDesc))
		}
		cs = append(cs,
			m.SyncFullProxyRulesLatency,
			m.SyncPartialProxyRulesLatency,
			m.IPTablesRestoreFailuresTotal,
			m.IPTablesPartialRestoreFailuresTotal,
			m.IPTablesRulesTotal,
			m.IPTablesRulesLastSync,
			m.ReconcileConntrackFlowsLatency,
			m.ReconcileConntrackFlowsDeletedEntriesTotal,
			m.DriftObjects,
			m.DriftRepairsTotal)
	case ModeIPVS:
		cs = append(cs,
			m.IPTablesRestoreFailuresTotal,
			m.ReconcileConntrackFlowsLatency,
			m.ReconcileConntrackFlowsDeletedEntriesTotal,
			m.DriftObjects,
			m.DriftRepairsTotal)
	case ModeNFTables:
		cs = append(cs,
			m.SyncFullProxyRulesLatency,
			m.SyncPartialProxyRulesLatency,
			m.NFTablesSyncFailuresTotal,
			m.NFTablesCleanupFailuresTotal)
		if opts.LocalhostNodePorts {
			cs = append(cs, m.LocalhostNodePortListeners, m.LocalhostNodePortListenerCreationFailuresTotal)
			if opts.NFTablesCounters != nil {
				cs = append(cs, newNFTablesRejectCollector(opts.NFTablesCounters))
			}
		}
		cs = append(cs,
			m.ReconcileConntrackFlowsLatency,
			m.ReconcileConntrackFlowsDeletedEntriesTotal,
			m.DriftObjects,
			m.DriftRepairsTotal)
	case ModeKernelspace:
		cs = append(cs, m.WinKernelLBCreateFailure, m.WinKernelLBUpdateFailure, m.WinKernelLBDeleteFailure)
	}
	if opts.BuildInfo != nil {
		cs = append(cs, newBuildInfoGauge(*opts.BuildInfo))
	}
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return fmt.Errorf("registering kube-proxy metrics: %w", err)
		}
	}
	m.registered = true
	return nil
}

// ProxyHealthz counts one /healthz answer with its HTTP status code. Nil-safe.
func (m *Metrics) ProxyHealthz(code int) {
	if m != nil {
		m.ProxyHealthzTotal.WithLabelValues(strconv.Itoa(code)).Inc()
	}
}

// ProxyLivez counts one /livez answer with its HTTP status code. Nil-safe.
func (m *Metrics) ProxyLivez(code int) {
	if m != nil {
		m.ProxyLivezTotal.WithLabelValues(strconv.Itoa(code)).Inc()
	}
}

// ServiceChanged counts a Service change and sets the pending count. Nil-safe.
func (m *Metrics) ServiceChanged(pending int) {
	if m != nil {
		m.ServiceChangesTotal.Inc()
		m.ServiceChangesPending.Set(float64(pending))
	}
}

// EndpointsChanged counts an EndpointSlice change and sets the pending count. Nil-safe.
func (m *Metrics) EndpointsChanged(pending int) {
	if m != nil {
		m.EndpointChangesTotal.Inc()
		m.EndpointChangesPending.Set(float64(pending))
	}
}

// SetPendingChanges sets both pending gauges (after a sync consumed the changes,
// usually to 0). Nil-safe.
func (m *Metrics) SetPendingChanges(services, endpoints int) {
	if m != nil {
		m.ServiceChangesPending.Set(float64(services))
		m.EndpointChangesPending.Set(float64(endpoints))
	}
}
