package takeover

import (
	"errors"
	"fmt"
	"time"

	"github.com/kproxy/kproxy/test/cluster/prober"
)

const (
	DefaultNamespace      = "kproxy-takeover"
	DefaultBackendImage   = "registry.k8s.io/e2e-test-images/agnhost:2.66.1"
	DefaultProberImage    = "kproxy.local/prober:dev"
	DefaultBackends       = 3
	DefaultSettle         = 10 * time.Second
	DefaultReadyTimeout   = 3 * time.Minute
	DefaultCleanupTimeout = 2 * time.Minute
	// DefaultExternalListen is where the external prober serves its summaries, inside
	// the client namespace.
	DefaultExternalListen = "127.0.0.1:9999"
	// MaxOutage is the bound: no outage over a second.
	MaxOutage = time.Second
	// DefaultRate is the probes per second per target. Every probe is a new
	// connection, and the takeover probes 24 targets (12 from pods, 12 from outside):
	// at 20/s the probers and backends kept about one of a 2-core machine's cores busy,
	// and with kernel 6.18.44-fc-v1272 (2026-12-05) a container start or exec on top of
	// that delayed replies past the 1 s probe timeout everywhere at once, with upstream
	// kube-proxy and with kproxy alike (the code CI had passed on failed the same way).
	// 5/s still sees any gap over 200 ms and leaves the machine to the proxies.
	DefaultRate = 5
)

// Options configures Run. Only Images and ProberBin are required.
type Options struct {
	// Images are the kube-proxy images to roll out, in order: [kproxy, upstream] on a
	// cluster that runs upstream's swaps to kproxy and back. One phase each.
	Images []string
	// Settle is how long the probes run after each rollout completes (DefaultSettle).
	Settle time.Duration
	// Baseline, when positive, adds a first phase that changes nothing and lasts this
	// long: a control, showing the probes pass on the cluster as it is.
	Baseline time.Duration
	// ProberBin is kproxy-prober on this machine, run in the client namespace.
	ProberBin string

	Namespace    string // DefaultNamespace; deleted first if it exists, and at the end
	BackendImage string // DefaultBackendImage (agnhost)
	ProberImage  string // DefaultProberImage (kproxy-prober)
	Backends     int32  // backend replicas; DefaultBackends

	Rate         float64       // probes per second per target; DefaultRate
	ProbeTimeout time.Duration // bound of one probe; prober.DefaultTimeout

	// ReadyTimeout bounds each wait before the first phase: the backends' rollout, the
	// probers' rollout, and every prober seeing every target answer (DefaultReadyTimeout).
	ReadyTimeout time.Duration
	// CleanupTimeout bounds the deletion of the namespace (DefaultCleanupTimeout).
	CleanupTimeout time.Duration
	// ExternalListen is where the external prober serves, in the client namespace.
	ExternalListen string
	// Keep leaves the namespace behind, for debugging.
	Keep bool
	// Label names the run in the report (the proxy mode, say).
	Label string
}

func (o Options) withDefaults() Options {
	if o.Settle == 0 {
		o.Settle = DefaultSettle
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.BackendImage == "" {
		o.BackendImage = DefaultBackendImage
	}
	if o.ProberImage == "" {
		o.ProberImage = DefaultProberImage
	}
	if o.Backends == 0 {
		o.Backends = DefaultBackends
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.ProbeTimeout == 0 {
		o.ProbeTimeout = prober.DefaultTimeout
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.CleanupTimeout == 0 {
		o.CleanupTimeout = DefaultCleanupTimeout
	}
	if o.ExternalListen == "" {
		o.ExternalListen = DefaultExternalListen
	}
	return o
}

func (o Options) validate() error {
	var errs []error
	if len(o.Images) == 0 {
		errs = append(errs, errors.New("no images to roll out"))
	}
	for i, img := range o.Images {
		if img == "" {
			errs = append(errs, fmt.Errorf("image %d is empty", i))
		}
	}
	if o.ProberBin == "" {
		errs = append(errs, errors.New("no ProberBin (kproxy-prober for the client namespace)"))
	}
	if o.Settle < 0 || o.Baseline < 0 || o.ReadyTimeout < 0 || o.CleanupTimeout < 0 || o.ProbeTimeout < 0 || o.Rate < 0 || o.Backends < 0 {
		errs = append(errs, errors.New("negative durations, rate or replicas"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("takeover options: %w", err)
	}
	return nil
}
