package nftables

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/dataplane/dptest"
)

// udpFlow is a UDP conntrack entry from client to frontend, DNATed to endpoint.
func udpFlow(client, frontend string, frontendPort uint16, endpoint string, endpointPort uint16) *netlink.ConntrackFlow {
	return &netlink.ConntrackFlow{
		FamilyType: unix.AF_INET,
		Forward: netlink.IPTuple{Protocol: unix.IPPROTO_UDP,
			SrcIP: net.ParseIP(client), SrcPort: 40000, DstIP: net.ParseIP(frontend), DstPort: frontendPort},
		Reverse: netlink.IPTuple{Protocol: unix.IPPROTO_UDP,
			SrcIP: net.ParseIP(endpoint), SrcPort: endpointPort, DstIP: net.ParseIP(client), DstPort: 40000},
	}
}

func flowTargets(flows []*netlink.ConntrackFlow) []string {
	var out []string
	for _, f := range flows {
		out = append(out, f.Forward.DstIP.String()+"->"+f.Reverse.SrcIP.String())
	}
	slices.Sort(out)
	return out
}

func (f *fixture) checkFlows(want ...string) {
	f.t.Helper()
	slices.Sort(want)
	if got := flowTargets(f.Conntrack.Entries(v1.IPv4Protocol)); !slices.Equal(got, want) {
		f.t.Errorf("conntrack flows = %v, want %v", got, want)
	}
}

func TestDeletedUDPServiceFlowsCleared(t *testing.T) {
	f := newFixture(t)
	addStandardServices(f)
	f.sync()

	f.Conntrack.SetEntries(v1.IPv4Protocol, []*netlink.ConntrackFlow{
		udpFlow("10.0.5.5", "172.30.0.53", 53, "10.0.1.2", 5353),
		udpFlow("10.0.5.5", "172.30.0.53", 53, "10.0.2.2", 5353),
		udpFlow("10.0.5.5", "172.30.0.99", 53, "10.0.9.9", 5353), // not a Service
	})
	// Only the Service goes; its EndpointSlice stays (it is garbage collected later).
	f.State.OnServiceDelete(dptest.Service("ns1", "dns", "172.30.0.53", dptest.WithPort("dns", v1.ProtocolUDP, 53, 5353)))
	f.sync()

	f.checkFlows("172.30.0.99->10.0.9.9")
	if got := f.metricValue("kubeproxy_conntrack_reconciler_deleted_entries_total", ipv4Label); got != 2 {
		t.Errorf("conntrack deleted entries = %v, want 2", got)
	}
	if n, _ := f.histogram("kubeproxy_conntrack_reconciler_sync_duration_seconds", ipv4Label); n == 0 {
		t.Errorf("conntrack reconcile duration not observed")
	}
}

func TestStaleUDPEndpointFlowsCleared(t *testing.T) {
	f := newFixture(t)
	addStandardServices(f)
	f.sync()

	f.Conntrack.SetEntries(v1.IPv4Protocol, []*netlink.ConntrackFlow{
		udpFlow("10.0.5.5", "172.30.0.53", 53, "10.0.1.2", 5353),
		udpFlow("10.0.5.6", "172.30.0.53", 53, "10.0.2.2", 5353),
	})
	// 10.0.2.2 stops serving.
	f.State.OnEndpointSliceUpdate(nil, dptest.Slice("ns1", "dns", "dns-1", 5353, "dns", v1.ProtocolUDP,
		dptest.Ready("10.0.1.2", testNodeName), dptest.NotReady("10.0.2.2", "node-b")))
	f.sync()
	f.checkFlows("172.30.0.53->10.0.1.2")
}

func TestTCPEndpointChangeLeavesConntrackAlone(t *testing.T) {
	f := newFixture(t)
	addStandardServices(f)
	f.sync()
	// A UDP flow that is stale, but nothing UDP changed: no reconciliation.
	f.Conntrack.SetEntries(v1.IPv4Protocol, []*netlink.ConntrackFlow{udpFlow("10.0.5.5", "172.30.0.53", 53, "10.0.7.7", 5353)})
	f.State.OnEndpointSliceUpdate(nil, dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.3.1", "node-c")))
	f.sync()
	f.checkFlows("172.30.0.53->10.0.7.7")
}

func TestConntrackCleanupWaitsForSuccessfulSync(t *testing.T) {
	f := newFixture(t)
	addStandardServices(f)
	f.sync()

	f.Conntrack.SetEntries(v1.IPv4Protocol, []*netlink.ConntrackFlow{
		udpFlow("10.0.5.5", "172.30.0.53", 53, "10.0.1.2", 5353),
		udpFlow("10.0.5.6", "172.30.0.53", 53, "10.0.2.2", 5353),
	})
	f.State.OnEndpointSliceUpdate(nil, dptest.Slice("ns1", "dns", "dns-1", 5353, "dns", v1.ProtocolUDP,
		dptest.Ready("10.0.1.2", testNodeName)))
	f.nft.failNext = 1
	if _, err := f.proxier.Sync(context.Background()); err == nil {
		t.Fatal("Sync succeeded despite the failed transaction")
	}
	// The rules still send traffic to 10.0.2.2: its flows must stay.
	f.checkFlows("172.30.0.53->10.0.1.2", "172.30.0.53->10.0.2.2")

	f.sync()
	f.checkFlows("172.30.0.53->10.0.1.2")
}

func TestConntrackFailureRetriedAtNextSync(t *testing.T) {
	f := newFixture(t)
	addStandardServices(f)
	f.sync()

	f.Conntrack.SetEntries(v1.IPv4Protocol, []*netlink.ConntrackFlow{udpFlow("10.0.5.6", "172.30.0.53", 53, "10.0.2.2", 5353)})
	f.Conntrack.SetListError(errors.New("netlink dump failed"))
	f.State.OnEndpointSliceUpdate(nil, dptest.Slice("ns1", "dns", "dns-1", 5353, "dns", v1.ProtocolUDP, dptest.Ready("10.0.1.2", testNodeName)))
	f.sync() // the rules are in; only the cleanup failed, which is not a sync error
	f.checkFlows("172.30.0.53->10.0.2.2")

	f.Conntrack.SetListError(nil)
	f.sync() // nothing changed in the model, the cleanup is still pending
	f.checkFlows()
}
