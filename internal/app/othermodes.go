package app

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/cleanup"
	"github.com/kproxy/kproxy/internal/config"
	"github.com/kproxy/kproxy/internal/metrics"
)

// startOtherModesCleanup removes what other proxy modes left (upstream's
// platformCleanup, never our own mode's) in the background and returns a channel
// closed when it is done. It touches only iptables/ipvs state, which the informers'
// initial list does not depend on, so running it while the Services and
// EndpointSlices are listed takes its 0.1-0.2 s (iptables backend detection, saves)
// off the time to the first sync; the daemon still waits for it before writing any
// rule, so the order the kernel sees is upstream's.
func startOtherModesCleanup(ctx context.Context, mode config.ProxyMode, m *metrics.Metrics, primary v1.IPFamily) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := cleanup.ForMode(ctx, mode, cleanup.Deps{}); err != nil {
			klog.FromContext(ctx).Error(err, "Failed to remove the rules of other proxy modes")
			m.Family(primary).IncNFTablesCleanupFailures()
		}
	}()
	return done
}
