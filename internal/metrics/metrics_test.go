package metrics

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
)

func registeredNames(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	return names
}

// describedNames lists every registered metric name, including those with no series
// yet (Gather omits empty vectors).
func describedNames(t *testing.T, m *Metrics, opts RegisterOptions) []string {
	t.Helper()
	reg := &recordingRegisterer{}
	m.reg = reg
	if err := m.Register(opts); err != nil {
		t.Fatalf("Register: %v", err)
	}
	var names []string
	for _, c := range reg.collectors {
		ch := make(chan *prometheus.Desc, 10)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			s := d.String()
			i := strings.Index(s, `fqName: "`) + len(`fqName: "`)
			names = append(names, s[i:i+strings.Index(s[i:], `"`)])
		}
	}
	slices.Sort(names)
	return names
}

type recordingRegisterer struct{ collectors []prometheus.Collector }

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return nil
}
func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
}
func (r *recordingRegisterer) Unregister(prometheus.Collector) bool { return false }

var coreNames = []string{
	"kubeproxy_network_programming_duration_seconds",
	"kubeproxy_proxy_healthz_total",
	"kubeproxy_proxy_livez_total",
	"kubeproxy_sync_proxy_rules_duration_seconds",
	"kubeproxy_sync_proxy_rules_endpoint_changes_pending",
	"kubeproxy_sync_proxy_rules_endpoint_changes_total",
	"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
	"kubeproxy_sync_proxy_rules_last_timestamp_seconds",
	"kubeproxy_sync_proxy_rules_no_local_endpoints_total",
	"kubeproxy_sync_proxy_rules_service_changes_pending",
	"kubeproxy_sync_proxy_rules_service_changes_total",
}

func withCore(extra ...string) []string {
	out := append(slices.Clone(coreNames), extra...)
	slices.Sort(out)
	return out
}

func TestRegisterPerMode(t *testing.T) {
	nfacct := func(context.Context, string) (uint64, error) { return 7, nil }
	nftCounters := func(context.Context, v1.IPFamily) (map[string]uint64, bool, error) { return nil, true, nil }
	conntrack := []string{"kubeproxy_conntrack_reconciler_deleted_entries_total", "kubeproxy_conntrack_reconciler_sync_duration_seconds"}
	// kproxy's own, in the modes that compare the kernel with what they applied.
	drift := []string{"kubeproxy_kproxy_drift_objects", "kubeproxy_kproxy_drift_repairs_total"}
	rules := slices.Concat(conntrack, drift)
	tests := []struct {
		name string
		opts RegisterOptions
		want []string
	}{
		{"nftables", RegisterOptions{Mode: ModeNFTables}, withCore(append(rules,
			"kubeproxy_sync_full_proxy_rules_duration_seconds",
			"kubeproxy_sync_partial_proxy_rules_duration_seconds",
			"kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total",
			"kubeproxy_sync_proxy_rules_nftables_sync_failures_total")...)},
		{"nftables localhost nodeports", RegisterOptions{Mode: ModeNFTables, LocalhostNodePorts: true, NFTablesCounters: nftCounters}, withCore(append(rules,
			"kubeproxy_sync_full_proxy_rules_duration_seconds",
			"kubeproxy_sync_partial_proxy_rules_duration_seconds",
			"kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total",
			"kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
			"kubeproxy_nftables_localhost_nodeport_listeners",
			"kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total",
			"kubeproxy_nftables_localhost_nodeport_rejected_packets_total")...)},
		{"iptables", RegisterOptions{Mode: ModeIPTables, IPTablesCounters: nfacct}, withCore(append(rules,
			"kubeproxy_iptables_ct_state_invalid_dropped_packets_total",
			"kubeproxy_iptables_localhost_nodeports_accepted_packets_total",
			"kubeproxy_sync_full_proxy_rules_duration_seconds",
			"kubeproxy_sync_partial_proxy_rules_duration_seconds",
			"kubeproxy_sync_proxy_rules_iptables_last",
			"kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total",
			"kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
			"kubeproxy_sync_proxy_rules_iptables_total")...)},
		{"iptables without nfacct", RegisterOptions{Mode: ModeIPTables}, withCore(append(rules,
			"kubeproxy_sync_full_proxy_rules_duration_seconds",
			"kubeproxy_sync_partial_proxy_rules_duration_seconds",
			"kubeproxy_sync_proxy_rules_iptables_last",
			"kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total",
			"kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
			"kubeproxy_sync_proxy_rules_iptables_total")...)},
		{"ipvs", RegisterOptions{Mode: ModeIPVS}, withCore(append(rules,
			"kubeproxy_sync_proxy_rules_iptables_restore_failures_total")...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := describedNames(t, New(nil), tc.opts)
			if !slices.Equal(got, tc.want) {
				t.Errorf("registered\n%v\nwant\n%v", got, tc.want)
			}
		})
	}
}

func TestRegisterTwiceFails(t *testing.T) {
	m := New(prometheus.NewRegistry())
	if err := m.Register(RegisterOptions{Mode: ModeNFTables}); err != nil {
		t.Fatal(err)
	}
	if err := m.Register(RegisterOptions{Mode: ModeNFTables}); err == nil {
		t.Fatal("second Register succeeded")
	}
}

func TestExpositionMatchesUpstream(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	if err := m.Register(RegisterOptions{Mode: ModeNFTables}); err != nil {
		t.Fatal(err)
	}
	fm := m.Family(v1.IPv4Protocol)
	fm.ObserveSync(3 * time.Millisecond)
	fm.SetNoLocalEndpoints(TrafficPolicyInternal, 2)
	fm.IncNFTablesSyncFailures()
	m.ProxyHealthz(200)
	m.ProxyHealthz(503)
	m.ProxyHealthz(200)
	m.ServiceChanged(3)

	want := `
# HELP kubeproxy_sync_proxy_rules_duration_seconds [ALPHA] SyncProxyRules latency in seconds
# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.001"} 0
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.002"} 0
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.004"} 1
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.008"} 1
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.016"} 1
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.032"} 1
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.064"} 1
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.128"} 1
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.256"} 1
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.512"} 1
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="1.024"} 1
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="2.048"} 1
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="4.096"} 1
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="8.192"} 1
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="16.384"} 1
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 1
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv4"} 0.003
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 1
# HELP kubeproxy_sync_proxy_rules_no_local_endpoints_total [ALPHA] Number of services with a Local traffic policy and no endpoints
# TYPE kubeproxy_sync_proxy_rules_no_local_endpoints_total gauge
kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv4",traffic_policy="internal"} 2
# HELP kubeproxy_proxy_healthz_total [ALPHA] Cumulative proxy healthz HTTP status
# TYPE kubeproxy_proxy_healthz_total counter
kubeproxy_proxy_healthz_total{code="200"} 2
kubeproxy_proxy_healthz_total{code="503"} 1
# HELP kubeproxy_sync_proxy_rules_nftables_sync_failures_total [ALPHA] Cumulative proxy nftables sync failures
# TYPE kubeproxy_sync_proxy_rules_nftables_sync_failures_total counter
kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family="IPv4"} 1
# HELP kubeproxy_sync_proxy_rules_service_changes_total [ALPHA] Cumulative proxy rules Service changes
# TYPE kubeproxy_sync_proxy_rules_service_changes_total counter
kubeproxy_sync_proxy_rules_service_changes_total 1
# HELP kubeproxy_sync_proxy_rules_service_changes_pending [ALPHA] Pending proxy rules Service changes
# TYPE kubeproxy_sync_proxy_rules_service_changes_pending gauge
kubeproxy_sync_proxy_rules_service_changes_pending 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"kubeproxy_sync_proxy_rules_duration_seconds",
		"kubeproxy_sync_proxy_rules_no_local_endpoints_total",
		"kubeproxy_proxy_healthz_total",
		"kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
		"kubeproxy_sync_proxy_rules_service_changes_total",
		"kubeproxy_sync_proxy_rules_service_changes_pending",
	); err != nil {
		t.Fatal(err)
	}
}

func TestNetworkProgrammingBuckets(t *testing.T) {
	b := networkProgrammingBuckets()
	if len(b) != 2+59+12+7 {
		t.Fatalf("%d buckets, want 80", len(b))
	}
	for _, want := range []struct {
		i int
		v float64
	}{{0, 0.25}, {1, 0.5}, {2, 1}, {60, 59}, {61, 60}, {72, 115}, {73, 120}, {79, 300}} {
		if b[want.i] != want.v {
			t.Errorf("bucket[%d] = %v, want %v", want.i, b[want.i], want.v)
		}
	}
	if !slices.IsSorted(b) {
		t.Error("buckets not sorted")
	}
}

func TestKernelCounterCollectors(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	counts := map[string]uint64{IPTablesCTStateInvalidDroppedNFAcctCounter: 42}
	nfacct := func(_ context.Context, name string) (uint64, error) {
		if v, ok := counts[name]; ok {
			return v, nil
		}
		return 0, errors.New("no such counter")
	}
	if err := m.Register(RegisterOptions{Mode: ModeIPTables, IPTablesCounters: nfacct}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP kubeproxy_iptables_ct_state_invalid_dropped_packets_total [ALPHA] packets dropped by iptables to work around conntrack problems
# TYPE kubeproxy_iptables_ct_state_invalid_dropped_packets_total counter
kubeproxy_iptables_ct_state_invalid_dropped_packets_total 42
`
	// The accepted-packets counter fails to read and is left out of the scrape.
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"kubeproxy_iptables_ct_state_invalid_dropped_packets_total",
		"kubeproxy_iptables_localhost_nodeports_accepted_packets_total"); err != nil {
		t.Fatal(err)
	}

	reg2 := prometheus.NewRegistry()
	m2 := New(reg2)
	list := func(_ context.Context, f v1.IPFamily) (map[string]uint64, bool, error) {
		if f == v1.IPv6Protocol {
			return nil, false, nil
		}
		return map[string]uint64{"localhost-nodeport-rejected-udp": 5, "other": 9}, true, nil
	}
	if err := m2.Register(RegisterOptions{Mode: ModeNFTables, LocalhostNodePorts: true, NFTablesCounters: list}); err != nil {
		t.Fatal(err)
	}
	want2 := `
# HELP kubeproxy_nftables_localhost_nodeport_rejected_packets_total [ALPHA] Number of packets rejected on localhost NodePorts. UDP and SCTP are always rejected; TCP is rejected when the localhost NodePort proxy is not running
# TYPE kubeproxy_nftables_localhost_nodeport_rejected_packets_total counter
kubeproxy_nftables_localhost_nodeport_rejected_packets_total{ip_family="IPv4",protocol="UDP"} 5
`
	if err := testutil.GatherAndCompare(reg2, strings.NewReader(want2),
		"kubeproxy_nftables_localhost_nodeport_rejected_packets_total"); err != nil {
		t.Fatal(err)
	}
}

func TestNilMetricsAreNoOps(t *testing.T) {
	var m *Metrics
	m.ProxyHealthz(200)
	m.ServiceChanged(1)
	fm := m.Family(v1.IPv4Protocol)
	fm.ObserveSync(time.Second)
	fm.SetLastSync(time.Now())
}

func TestGathererMergesTheProcessWideRegistry(t *testing.T) {
	own := NewRegistry()
	m := New(own)
	if err := m.Register(RegisterOptions{Mode: ModeNFTables}); err != nil {
		t.Fatal(err)
	}
	m.ServiceChanged(1)
	if names := registeredNames(t, own); slices.ContainsFunc(names, func(n string) bool {
		return strings.HasPrefix(n, "go_") || strings.HasPrefix(n, "process_")
	}) {
		// They live in the process-wide registry; both having them fails the scrape.
		t.Errorf("own registry has runtime collectors: %v", names)
	}
	shared := prometheus.NewRegistry()
	shared.MustRegister(collectors.NewGoCollector())
	g := NewGatherer(own, shared)
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	for _, want := range []string{"go_goroutines", "kubeproxy_sync_proxy_rules_service_changes_total"} {
		if !slices.Contains(names, want) {
			t.Errorf("merged gatherer lacks %s: %v", want, names)
		}
	}
	if NewGatherer(own, nil) != prometheus.Gatherer(own) {
		t.Error("NewGatherer(own, nil) is not own")
	}
}
