package app

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/cleanup"
	"github.com/kproxy/kproxy/internal/config"
	"github.com/kproxy/kproxy/internal/metrics"
)

// cleanupOtherModes removes what other proxy modes left (upstream's platformCleanup,
// never our own mode's). It touches only iptables/ipvs state, which the informers'
// initial list does not depend on, so the daemon runs it while the Services and
// EndpointSlices are listed, taking its 0.1-0.2 s (iptables backend detection,
// saves) off the time to the first sync; no rule is written before it is done, so
// the order the kernel sees is upstream's. Failures are logged and counted, not
// fatal, as upstream.
func cleanupOtherModes(ctx context.Context, mode config.ProxyMode, m *metrics.Metrics, primary v1.IPFamily) {
	if err := cleanup.ForMode(ctx, mode, cleanup.Deps{}); err != nil {
		klog.FromContext(ctx).Error(err, "Failed to remove the rules of other proxy modes")
		m.Family(primary).IncNFTablesCleanupFailures()
	}
}
