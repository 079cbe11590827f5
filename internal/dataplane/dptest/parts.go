package dptest

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kproxy/kproxy/internal/conntrack"
	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
	"github.com/kproxy/kproxy/internal/metrics"
	"github.com/kproxy/kproxy/internal/model"
)

// Parts are the fakes every mode's proxier fixture wires into its
// proxycore.Config, for an IPv4 proxier on node nodeName.
type Parts struct {
	State     *model.State
	Conntrack *conntrack.Fake
	Registry  *prometheus.Registry
	Metrics   *metrics.Metrics
	Clock     *clocktesting.FakeClock
	Health    *Health
	SvcHealth *ServiceHealth
}

// NewParts returns the fakes, with the metrics of mode (metrics.ModeNFTables,
// metrics.ModeIPTables) registered.
func NewParts(t testing.TB, mode, nodeName string) *Parts {
	t.Helper()
	p := &Parts{
		State:     model.NewState(v1.IPv4Protocol, nodeName),
		Conntrack: conntrack.NewFake(),
		Registry:  prometheus.NewRegistry(),
		Clock:     clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)),
		Health:    &Health{},
		SvcHealth: &ServiceHealth{},
	}
	p.Metrics = metrics.New(p.Registry)
	if err := p.Metrics.Register(metrics.RegisterOptions{Mode: mode}); err != nil {
		t.Fatalf("registering metrics: %v", err)
	}
	return p
}

// CoreConfig is the proxycore.Config over the fakes.
func (p *Parts) CoreConfig() proxycore.Config {
	return proxycore.Config{
		Family:        v1.IPv4Protocol,
		State:         p.State,
		Conntrack:     p.Conntrack,
		Metrics:       p.Metrics.Family(v1.IPv4Protocol),
		Health:        p.Health,
		ServiceHealth: p.SvcHealth,
		Clock:         p.Clock,
	}
}
