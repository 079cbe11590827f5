package iptables

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/dataplane/dptest"
	"github.com/kproxy/kproxy/internal/iptables"
)

func TestNetworkProgrammingDuration(t *testing.T) {
	f := newFixture(t)
	addStandardServices(f)
	f.sync()

	changed := f.Clock.Now()
	f.Clock.Step(5 * time.Second)
	f.State.OnEndpointSliceUpdate(nil, dptest.WithTriggerTime(dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP,
		dptest.Ready("10.0.3.1", "node-c")), changed))
	f.sync()

	if count := f.histogram("kubeproxy_network_programming_duration_seconds", ipv4Label); count != 1 {
		t.Errorf("network programming duration: %d samples, want 1", count)
	}

	// A failed sync records nothing; the sync that applies the change does.
	f.Clock.Step(time.Second)
	changed = f.Clock.Now()
	f.Clock.Step(2 * time.Second)
	f.State.OnEndpointSliceUpdate(nil, dptest.WithTriggerTime(dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP,
		dptest.Ready("10.0.3.2", "node-c")), changed))
	f.ipt.FailNext(iptables.OpRestore, errInjected)
	f.ipt.FailNext(iptables.OpRestore, errInjected)
	_, _ = f.proxier.Sync(context.Background())
	if count := f.histogram("kubeproxy_network_programming_duration_seconds", ipv4Label); count != 1 {
		t.Errorf("a failed sync observed network programming latency")
	}
}

func TestNoLocalEndpointsGauge(t *testing.T) {
	internal := map[string]string{"ip_family": "IPv4", "traffic_policy": "internal"}
	external := map[string]string{"ip_family": "IPv4", "traffic_policy": "external"}

	f := newFixture(t)
	addStandardServices(f) // ns2/lb: eTP Local, its only endpoint on node-b
	f.State.OnServiceAdd(dptest.Service("ns3", "itp", "172.30.0.40", dptest.WithPort("", v1.ProtocolTCP, 80, 8080), dptest.WithInternalLocal()))
	f.State.OnEndpointSliceAdd(dptest.Slice("ns3", "itp", "itp-1", 8080, "", v1.ProtocolTCP, dptest.Ready("10.0.2.4", "node-b")))
	// iTP Local without any endpoint: not counted (upstream counts only Services
	// that have endpoints elsewhere).
	f.State.OnServiceAdd(dptest.Service("ns3", "empty", "172.30.0.41", dptest.WithPort("", v1.ProtocolTCP, 80, 8080), dptest.WithInternalLocal()))
	f.sync()

	check := func(step string, wantInternal, wantExternal float64) {
		t.Helper()
		if got := f.metricValue("kubeproxy_sync_proxy_rules_no_local_endpoints_total", internal); got != wantInternal {
			t.Errorf("%s: internal no-local-endpoints = %v, want %v", step, got, wantInternal)
		}
		if got := f.metricValue("kubeproxy_sync_proxy_rules_no_local_endpoints_total", external); got != wantExternal {
			t.Errorf("%s: external no-local-endpoints = %v, want %v", step, got, wantExternal)
		}
	}
	check("first sync", 1, 1)

	f.State.OnEndpointSliceUpdate(nil, dptest.Slice("ns2", "lb", "lb-1", 8080, "http", v1.ProtocolTCP,
		dptest.Ready("10.0.2.3", "node-b"), dptest.Ready("10.0.1.3", testNodeName)))
	f.sync()
	check("local endpoint for the LB", 1, 0)

	f.State.OnServiceDelete(dptest.Service("ns3", "itp", "172.30.0.40", dptest.WithPort("", v1.ProtocolTCP, 80, 8080), dptest.WithInternalLocal()))
	f.sync()
	check("iTP Service deleted", 0, 0)

	f.State.OnEndpointSliceUpdate(nil, dptest.Slice("ns2", "lb", "lb-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.2.3", "node-b")))
	f.ipt.FailNext(iptables.OpRestore, errInjected)
	f.ipt.FailNext(iptables.OpRestore, errInjected)
	_, _ = f.proxier.Sync(context.Background())
	f.sync() // full resync recomputes the gauge from the whole model
	check("after a failed sync and recovery", 0, 1)
}
