package metrics

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"
)

// Localhost NodePorts in nftables mode (the KubeProxyNFTablesLocalhostNodePorts
// feature gate) have three metrics, registered by Register in nftables mode when
// RegisterOptions.LocalhostNodePorts is set, as upstream:
//
//   - kubeproxy_nftables_localhost_nodeport_listeners{ip_family} (gauge): the
//     userspace listeners bound (FamilyMetrics.SetLocalhostNodePortListeners);
//   - kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total{ip_family}
//     (counter): listeners that could not be bound
//     (FamilyMetrics.IncLocalhostNodePortListenerFailures);
//   - kubeproxy_nftables_localhost_nodeport_rejected_packets_total{ip_family,protocol}
//     (counter): the named counters localhost-nodeport-rejected-<protocol> of the
//     kube-proxy table of each family, read at scrape time through
//     RegisterOptions.NFTablesCounters, for which NFTablesCounterReader adapts the
//     caller's knftables interfaces.

// NFTablesCounterReader returns an NFTablesCounterLister reading the named counters
// of the table each client of clients (one per family) is bound to, with
// knftables.Interface.ListCounters. A family without a client, or whose table does
// not exist yet, has no samples. nil when clients is empty, which leaves the
// rejected-packets metric unregistered, as upstream when it cannot create its
// nftables clients.
func NFTablesCounterReader(clients map[v1.IPFamily]knftables.Interface) NFTablesCounterLister {
	if len(clients) == 0 {
		return nil
	}
	return func(ctx context.Context, family v1.IPFamily) (map[string]uint64, bool, error) {
		client := clients[family]
		if client == nil {
			return nil, false, nil
		}
		counters, err := client.ListCounters(ctx)
		switch {
		case knftables.IsNotFound(err):
			return nil, false, nil
		case err != nil:
			return nil, false, err
		}
		out := make(map[string]uint64, len(counters))
		for _, c := range counters {
			if c != nil && c.Packets != nil {
				out[c.Name] = *c.Packets
			}
		}
		return out, true, nil
	}
}
