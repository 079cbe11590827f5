package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"
)

// errLister is a knftables.Interface whose ListCounters fails with err.
type errLister struct {
	knftables.Interface
	err error
}

func (l errLister) ListCounters(context.Context) ([]*knftables.Counter, error) { return nil, l.err }

// tableNotFound is the error knftables returns for a table that does not exist.
func tableNotFound(t *testing.T) error {
	t.Helper()
	fake := knftables.NewFake(knftables.IPv6Family, "kube-proxy")
	tx := fake.NewTransaction()
	tx.Delete(&knftables.Table{})
	err := fake.Run(context.Background(), tx)
	if !knftables.IsNotFound(err) {
		t.Fatalf("deleting a missing table: %v, want a not-found error", err)
	}
	return err
}

// TestLocalhostNodePortMetrics: with the gate in nftables mode the three metrics
// have upstream's names, types, labels and help; the rejected packets are read from
// the named counters of each family's table (a missing table or a failing read
// giving no sample).
func TestLocalhostNodePortMetrics(t *testing.T) {
	v4 := knftables.NewFake(knftables.IPv4Family, "kube-proxy")
	tx := v4.NewTransaction()
	tx.Add(&knftables.Table{})
	for _, p := range []v1.Protocol{v1.ProtocolUDP, v1.ProtocolSCTP} {
		tx.Add(&knftables.Counter{Name: LocalhostNodePortRejectedCounterName(p)})
	}
	tx.Add(&knftables.Counter{Name: "unrelated"})
	if err := v4.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	v4.Table.Counters["localhost-nodeport-rejected-udp"].Packets = knftables.PtrTo[uint64](7)
	v4.Table.Counters["localhost-nodeport-rejected-sctp"].Packets = knftables.PtrTo[uint64](3)
	v4.Table.Counters["unrelated"].Packets = knftables.PtrTo[uint64](99)
	v6 := errLister{err: tableNotFound(t)} // no table yet

	reg := prometheus.NewRegistry()
	m := New(reg)
	lister := NFTablesCounterReader(map[v1.IPFamily]knftables.Interface{v1.IPv4Protocol: v4, v1.IPv6Protocol: v6})
	if err := m.Register(RegisterOptions{Mode: ModeNFTables, LocalhostNodePorts: true, NFTablesCounters: lister}); err != nil {
		t.Fatal(err)
	}
	m.Family(v1.IPv4Protocol).SetLocalhostNodePortListeners(2)
	m.Family(v1.IPv6Protocol).SetLocalhostNodePortListeners(0)
	m.Family(v1.IPv4Protocol).IncLocalhostNodePortListenerFailures()

	want := `
# HELP kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total [ALPHA] Number of localhost NodePort userspace proxy listener creation failures.
# TYPE kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total counter
kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total{ip_family="IPv4"} 1
# HELP kubeproxy_nftables_localhost_nodeport_listeners [ALPHA] Number of active localhost NodePort userspace proxy listeners.
# TYPE kubeproxy_nftables_localhost_nodeport_listeners gauge
kubeproxy_nftables_localhost_nodeport_listeners{ip_family="IPv4"} 2
kubeproxy_nftables_localhost_nodeport_listeners{ip_family="IPv6"} 0
# HELP kubeproxy_nftables_localhost_nodeport_rejected_packets_total [ALPHA] Number of packets rejected on localhost NodePorts. UDP and SCTP are always rejected; TCP is rejected when the localhost NodePort proxy is not running
# TYPE kubeproxy_nftables_localhost_nodeport_rejected_packets_total counter
kubeproxy_nftables_localhost_nodeport_rejected_packets_total{ip_family="IPv4",protocol="SCTP"} 3
kubeproxy_nftables_localhost_nodeport_rejected_packets_total{ip_family="IPv4",protocol="UDP"} 7
`
	names := []string{
		"kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total",
		"kubeproxy_nftables_localhost_nodeport_listeners",
		"kubeproxy_nftables_localhost_nodeport_rejected_packets_total",
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}

	// A failing read omits that family's samples from the scrape.
	failing := NFTablesCounterReader(map[v1.IPFamily]knftables.Interface{v1.IPv4Protocol: errLister{err: errors.New("nft is gone")}})
	if _, _, err := failing(context.Background(), v1.IPv4Protocol); err == nil {
		t.Error("the failing lister reported no error")
	}
	if _, found, err := failing(context.Background(), v1.IPv6Protocol); found || err != nil {
		t.Errorf("a family without a client: found=%v err=%v", found, err)
	}
	if NFTablesCounterReader(nil) != nil {
		t.Error("a reader without clients")
	}
}

// TestLocalhostNodePortMetricsNeedTheGate: without the gate (or in another mode)
// none of the three is registered, as upstream.
func TestLocalhostNodePortMetricsNeedTheGate(t *testing.T) {
	list := func(context.Context, v1.IPFamily) (map[string]uint64, bool, error) { return nil, false, nil }
	for _, opts := range []RegisterOptions{
		{Mode: ModeNFTables, NFTablesCounters: list},
		{Mode: ModeIPTables, LocalhostNodePorts: true, NFTablesCounters: list},
	} {
		m := New(prometheus.NewRegistry())
		for _, name := range describedNames(t, m, opts) {
			if strings.Contains(name, "nftables_localhost_nodeport") {
				t.Errorf("%+v: %s registered", opts, name)
			}
		}
	}
}
