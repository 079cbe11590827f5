package dptest

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	"github.com/kproxy/kproxy/internal/dataplane/followup"
	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
)

// NodeName is the node the shared scenarios' proxier runs on.
const NodeName = "node-a"

// NodeIP is the address serving NodePorts in the shared scenarios.
const NodeIP = "192.168.0.2"

// Fixture is one mode's IPv4 proxier over the fakes, on NodeName, as the shared
// scenarios drive it.
type Fixture interface {
	// Fakes are the fakes the proxier was built with.
	Fakes() *Parts
	// Sync is the proxier's Sync.
	Sync(ctx context.Context) (bool, error)
	// FailNextSync makes every write of the next Sync fail, as a kernel refusing
	// them would.
	FailNextSync()
	// Writes counts the writes (transactions, restores) the writer was asked for.
	Writes() int
	// LastWriteWasFull reports whether the last write rewrote everything.
	LastWriteWasFull() bool
	// CheckFullRender fails t unless the writer holds exactly what a new proxier
	// would write for the model, with nodePortIPs serving NodePorts.
	CheckFullRender(t *testing.T, nodePortIPs []netip.Addr)
	// Programmed is the writer's content as text.
	Programmed() string
	// Inspectable is what the state API and the status page read of the proxier.
	Inspectable() proxycore.Inspectable
}

// NewFixture builds a Fixture; mutate, when not nil, changes the proxier's
// proxycore.Config before it is built.
type NewFixture func(t *testing.T, mutate func(*proxycore.Config)) Fixture

// Fakes returns p, for Fixture implementations that embed *Parts.
func (p *Parts) Fakes() *Parts { return p }

// RunScenarios runs, against one mode's proxier, the scenarios whose outcome does
// not depend on the mode: conntrack cleanup, metrics, service health, node
// addresses, invalid data, what a sync reports as written.
func RunScenarios(t *testing.T, newFixture NewFixture) {
	scenarios := []struct {
		name string
		run  func(*testing.T, NewFixture)
	}{
		{"DeletedUDPServiceFlowsCleared", deletedUDPServiceFlowsCleared},
		{"StaleUDPEndpointFlowsCleared", staleUDPEndpointFlowsCleared},
		{"TCPEndpointChangeLeavesConntrackAlone", tcpEndpointChangeLeavesConntrackAlone},
		{"ConntrackCleanupWaitsForSuccessfulSync", conntrackCleanupWaitsForSuccessfulSync},
		{"ConntrackFailureRetriedAtNextSync", conntrackFailureRetriedAtNextSync},
		{"NetworkProgrammingDuration", networkProgrammingDuration},
		{"NoLocalEndpointsGauge", noLocalEndpointsGauge},
		{"SyncReportsWhetherItWrote", syncReportsWhetherItWrote},
		{"NodePortIPsChange", nodePortIPsChange},
		{"ServiceHealthChangeSurvivesFailedSync", serviceHealthChangeSurvivesFailedSync},
		{"ServiceHealthFailureRetried", serviceHealthFailureRetried},
		{"HealthUpdatedOncePerSuccessfulSync", healthUpdatedOncePerSuccessfulSync},
		{"OptionalDependenciesMayBeNil", optionalDependenciesMayBeNil},
		{"InvalidDataIsSkipped", invalidDataIsSkipped},
	}
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) { s.run(t, newFixture) })
	}
}

// AddStandardServices feeds the model a TCP ClusterIP Service, a UDP ClusterIP
// Service (each with an endpoint on NodeName and one elsewhere) and an eTP=Local
// LoadBalancer whose only endpoint is on another node.
func (p *Parts) AddStandardServices() {
	st := p.State
	st.OnServiceAdd(Service("ns1", "web", "172.30.0.10", WithPort("http", v1.ProtocolTCP, 80, 8080)))
	st.AddEndpointSlice(Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP,
		Ready("10.0.1.1", NodeName), Ready("10.0.2.1", "node-b")))

	st.OnServiceAdd(Service("ns1", "dns", "172.30.0.53", WithPort("dns", v1.ProtocolUDP, 53, 5353)))
	st.AddEndpointSlice(Slice("ns1", "dns", "dns-1", 5353, "dns", v1.ProtocolUDP,
		Ready("10.0.1.2", NodeName), Ready("10.0.2.2", "node-b")))

	st.OnServiceAdd(Service("ns2", "lb", "172.30.0.20", WithPort("http", v1.ProtocolTCP, 80, 8080),
		AsLoadBalancer("1.2.3.4", 30080, true, 30999)))
	st.AddEndpointSlice(Slice("ns2", "lb", "lb-1", 8080, "http", v1.ProtocolTCP, Ready("10.0.2.3", "node-b")))
}

// IPv4Label is the family label of the IPv4 proxier's metrics.
var IPv4Label = map[string]string{"ip_family": "IPv4"}

// started builds a fixture with the standard Services and syncs it once.
func started(t *testing.T, newFixture NewFixture, mutate func(*proxycore.Config)) (Fixture, *Parts) {
	t.Helper()
	f := newFixture(t, mutate)
	p := f.Fakes()
	p.AddStandardServices()
	mustSync(t, f)
	return f, p
}

func mustSync(t *testing.T, f Fixture) {
	t.Helper()
	if _, err := f.Sync(context.Background()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

func mustFailSync(t *testing.T, f Fixture) {
	t.Helper()
	f.FailNextSync()
	if _, err := f.Sync(context.Background()); err == nil {
		t.Fatal("Sync succeeded despite the failed writes")
	}
}

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

// checkFlows checks the frontend->endpoint pairs of the fake conntrack table.
func checkFlows(t *testing.T, p *Parts, want ...string) {
	t.Helper()
	var got []string
	for _, f := range p.Conntrack.Entries(v1.IPv4Protocol) {
		got = append(got, f.Forward.DstIP.String()+"->"+f.Reverse.SrcIP.String())
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("conntrack flows = %v, want %v", got, want)
	}
}

func deletedUDPServiceFlowsCleared(t *testing.T, newFixture NewFixture) {
	f, p := started(t, newFixture, nil)
	p.Conntrack.SetEntries(v1.IPv4Protocol, []*netlink.ConntrackFlow{
		udpFlow("10.0.5.5", "172.30.0.53", 53, "10.0.1.2", 5353),
		udpFlow("10.0.5.5", "172.30.0.53", 53, "10.0.2.2", 5353),
		udpFlow("10.0.5.5", "172.30.0.99", 53, "10.0.9.9", 5353), // not a Service
	})
	// Only the Service goes; its EndpointSlice stays (it is garbage collected later).
	p.State.OnServiceDelete(Service("ns1", "dns", "172.30.0.53", WithPort("dns", v1.ProtocolUDP, 53, 5353)))
	mustSync(t, f)

	checkFlows(t, p, "172.30.0.99->10.0.9.9")
	if got := Value(t, p.Registry, "kubeproxy_conntrack_reconciler_deleted_entries_total", IPv4Label); got != 2 {
		t.Errorf("conntrack deleted entries = %v, want 2", got)
	}
	if n, _ := Histogram(t, p.Registry, "kubeproxy_conntrack_reconciler_sync_duration_seconds", IPv4Label); n == 0 {
		t.Errorf("conntrack reconcile duration not observed")
	}
}

func staleUDPEndpointFlowsCleared(t *testing.T, newFixture NewFixture) {
	f, p := started(t, newFixture, nil)
	p.Conntrack.SetEntries(v1.IPv4Protocol, []*netlink.ConntrackFlow{
		udpFlow("10.0.5.5", "172.30.0.53", 53, "10.0.1.2", 5353),
		udpFlow("10.0.5.6", "172.30.0.53", 53, "10.0.2.2", 5353),
	})
	// 10.0.2.2 stops serving.
	p.State.UpdateEndpointSlice(nil, Slice("ns1", "dns", "dns-1", 5353, "dns", v1.ProtocolUDP,
		Ready("10.0.1.2", NodeName), NotReady("10.0.2.2", "node-b")))
	mustSync(t, f)
	checkFlows(t, p, "172.30.0.53->10.0.1.2")
}

func tcpEndpointChangeLeavesConntrackAlone(t *testing.T, newFixture NewFixture) {
	f, p := started(t, newFixture, nil)
	// A UDP flow that is stale, but nothing UDP changed: no reconciliation.
	p.Conntrack.SetEntries(v1.IPv4Protocol, []*netlink.ConntrackFlow{udpFlow("10.0.5.5", "172.30.0.53", 53, "10.0.7.7", 5353)})
	p.State.UpdateEndpointSlice(nil, Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, Ready("10.0.3.1", "node-c")))
	mustSync(t, f)
	checkFlows(t, p, "172.30.0.53->10.0.7.7")
}

func conntrackCleanupWaitsForSuccessfulSync(t *testing.T, newFixture NewFixture) {
	f, p := started(t, newFixture, nil)
	p.Conntrack.SetEntries(v1.IPv4Protocol, []*netlink.ConntrackFlow{
		udpFlow("10.0.5.5", "172.30.0.53", 53, "10.0.1.2", 5353),
		udpFlow("10.0.5.6", "172.30.0.53", 53, "10.0.2.2", 5353),
	})
	p.State.UpdateEndpointSlice(nil, Slice("ns1", "dns", "dns-1", 5353, "dns", v1.ProtocolUDP, Ready("10.0.1.2", NodeName)))
	mustFailSync(t, f)
	// The rules still send traffic to 10.0.2.2: its flows must stay.
	checkFlows(t, p, "172.30.0.53->10.0.1.2", "172.30.0.53->10.0.2.2")
	mustSync(t, f)
	checkFlows(t, p, "172.30.0.53->10.0.1.2")
}

func conntrackFailureRetriedAtNextSync(t *testing.T, newFixture NewFixture) {
	f, p := started(t, newFixture, nil)
	p.Conntrack.SetEntries(v1.IPv4Protocol, []*netlink.ConntrackFlow{udpFlow("10.0.5.6", "172.30.0.53", 53, "10.0.2.2", 5353)})
	p.Conntrack.SetListError(errors.New("netlink dump failed"))
	p.State.UpdateEndpointSlice(nil, Slice("ns1", "dns", "dns-1", 5353, "dns", v1.ProtocolUDP, Ready("10.0.1.2", NodeName)))
	mustSync(t, f) // the rules are in; only the cleanup failed, which is not a sync error
	checkFlows(t, p, "172.30.0.53->10.0.2.2")

	p.Conntrack.SetListError(nil)
	mustSync(t, f) // nothing changed in the model, the cleanup is still pending
	checkFlows(t, p)
}

func networkProgrammingDuration(t *testing.T, newFixture NewFixture) {
	f, p := started(t, newFixture, nil)
	changed := p.Clock.Now()
	p.Clock.Step(5 * time.Second)
	p.State.UpdateEndpointSlice(nil, WithTriggerTime(Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP,
		Ready("10.0.3.1", "node-c")), changed))
	mustSync(t, f)

	count, sum := Histogram(t, p.Registry, "kubeproxy_network_programming_duration_seconds", IPv4Label)
	if count != 1 || sum != 5 {
		t.Errorf("network programming duration: %d samples summing %vs, want 1 of 5s", count, sum)
	}

	// A failed sync records nothing; the sync that applies the change does.
	p.Clock.Step(time.Second)
	changed = p.Clock.Now()
	p.Clock.Step(2 * time.Second)
	p.State.UpdateEndpointSlice(nil, WithTriggerTime(Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP,
		Ready("10.0.3.2", "node-c")), changed))
	mustFailSync(t, f)
	if count, _ := Histogram(t, p.Registry, "kubeproxy_network_programming_duration_seconds", IPv4Label); count != 1 {
		t.Errorf("a failed sync observed network programming latency")
	}

	// The status page's series has the same latencies, and the failure, through
	// the Core whatever the mode.
	var syncs, failures int
	var programmed followup.Programming
	for _, b := range f.Inspectable().Series() {
		syncs += b.Syncs
		failures += b.Failures
		programmed.Count += b.Programming.Count
		programmed.Sum += b.Programming.Sum
		programmed.Max = max(programmed.Max, b.Programming.Max)
	}
	if want := (followup.Programming{Count: 1, Sum: 5 * time.Second, Max: 5 * time.Second}); syncs != 3 || failures != 1 || programmed != want {
		t.Errorf("series: %d syncs, %d failed, programming %+v; want 3, 1 and %+v", syncs, failures, programmed, want)
	}
	if fs := f.Inspectable().Failures(); len(fs) != 1 || fs[0].Err == nil {
		t.Errorf("failures kept: %+v, want the failed sync", fs)
	}
}

func noLocalEndpointsGauge(t *testing.T, newFixture NewFixture) {
	internal := map[string]string{"ip_family": "IPv4", "traffic_policy": "internal"}
	external := map[string]string{"ip_family": "IPv4", "traffic_policy": "external"}

	f := newFixture(t, nil)
	p := f.Fakes()
	p.AddStandardServices() // ns2/lb: eTP Local, its only endpoint on node-b
	p.State.OnServiceAdd(Service("ns3", "itp", "172.30.0.40", WithPort("", v1.ProtocolTCP, 80, 8080), WithInternalLocal()))
	p.State.AddEndpointSlice(Slice("ns3", "itp", "itp-1", 8080, "", v1.ProtocolTCP, Ready("10.0.2.4", "node-b")))
	// iTP Local without any endpoint: not counted (upstream counts only Services
	// that have endpoints elsewhere).
	p.State.OnServiceAdd(Service("ns3", "empty", "172.30.0.41", WithPort("", v1.ProtocolTCP, 80, 8080), WithInternalLocal()))
	mustSync(t, f)

	check := func(step string, wantInternal, wantExternal float64) {
		t.Helper()
		if got := Value(t, p.Registry, "kubeproxy_sync_proxy_rules_no_local_endpoints_total", internal); got != wantInternal {
			t.Errorf("%s: internal no-local-endpoints = %v, want %v", step, got, wantInternal)
		}
		if got := Value(t, p.Registry, "kubeproxy_sync_proxy_rules_no_local_endpoints_total", external); got != wantExternal {
			t.Errorf("%s: external no-local-endpoints = %v, want %v", step, got, wantExternal)
		}
	}
	check("first sync", 1, 1)

	p.State.UpdateEndpointSlice(nil, Slice("ns2", "lb", "lb-1", 8080, "http", v1.ProtocolTCP,
		Ready("10.0.2.3", "node-b"), Ready("10.0.1.3", NodeName)))
	mustSync(t, f)
	check("local endpoint for the LB", 1, 0)

	p.State.OnServiceDelete(Service("ns3", "itp", "172.30.0.40", WithPort("", v1.ProtocolTCP, 80, 8080), WithInternalLocal()))
	mustSync(t, f)
	check("iTP Service deleted", 0, 0)

	p.State.UpdateEndpointSlice(nil, Slice("ns2", "lb", "lb-1", 8080, "http", v1.ProtocolTCP, Ready("10.0.2.3", "node-b")))
	mustFailSync(t, f)
	mustSync(t, f) // full resync recomputes the gauge from the whole model
	check("after a failed sync and recovery", 0, 1)
}

// syncReportsWhetherItWrote checks what Sync reports as written, which the sync
// runner's minSyncPeriod cooldown depends on (internal/syncer): the first sync
// writes, a sync with nothing new writes nothing, a changed endpoint writes, and
// the sync after it writes nothing again.
func syncReportsWhetherItWrote(t *testing.T, newFixture NewFixture) {
	f := newFixture(t, nil)
	state := f.Fakes().State
	step := func(what string, want bool) {
		t.Helper()
		wrote, err := f.Sync(context.Background())
		if err != nil {
			t.Fatalf("%s: Sync: %v", what, err)
		}
		if wrote != want {
			t.Errorf("%s: Sync reported wrote=%t, want %t", what, wrote, want)
		}
	}
	state.OnServiceAdd(Service("ns1", "web", "172.30.0.10", WithPort("http", v1.ProtocolTCP, 80, 8080)))
	old := Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, Ready("10.0.1.1", "node-b"))
	state.AddEndpointSlice(old)
	step("first sync", true)
	step("nothing changed", false)
	state.UpdateEndpointSlice(old, Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, Ready("10.0.1.2", "node-b")))
	step("endpoint replaced", true)
	step("nothing changed since", false)
}

func nodePortIPsChange(t *testing.T, newFixture NewFixture) {
	ips := []netip.Addr{netip.MustParseAddr(NodeIP)}
	var listErr error
	f, _ := started(t, newFixture, func(c *proxycore.Config) {
		c.NodePortIPs = func() ([]netip.Addr, error) { return ips, listErr }
	})
	f.CheckFullRender(t, ips)

	ips = []netip.Addr{netip.MustParseAddr(NodeIP), netip.MustParseAddr("192.168.1.2")}
	mustSync(t, f)
	if f.LastWriteWasFull() {
		t.Errorf("a node address change rewrote everything")
	}
	want := ips
	f.CheckFullRender(t, want)

	// A failure to list keeps the previous addresses.
	listErr = errors.New("netlink is down")
	ips = nil
	writes := f.Writes()
	mustSync(t, f)
	if f.Writes() != writes {
		t.Errorf("a failure to list node addresses wrote to the kernel")
	}
	f.CheckFullRender(t, want)
}

var lbName = types.NamespacedName{Namespace: "ns2", Name: "lb"}

func serviceHealthChangeSurvivesFailedSync(t *testing.T, newFixture NewFixture) {
	f, p := started(t, newFixture, nil)
	p.State.OnServiceUpdate(nil, Service("ns2", "lb", "172.30.0.20", WithPort("http", v1.ProtocolTCP, 80, 8080),
		AsLoadBalancer("1.2.3.4", 30080, true, 30998)))
	mustFailSync(t, f)
	mustSync(t, f)
	if last := p.SvcHealth.Services[len(p.SvcHealth.Services)-1]; last[lbName] != 30998 {
		t.Errorf("after recovering from a failed sync, health check ports = %v, want {ns2/lb: 30998}", last)
	}
}

func serviceHealthFailureRetried(t *testing.T, newFixture NewFixture) {
	f := newFixture(t, nil)
	p := f.Fakes()
	p.AddStandardServices()
	p.SvcHealth.Err = errors.New("port in use")
	mustSync(t, f) // a health server failure does not fail the sync
	p.SvcHealth.Err = nil
	mustSync(t, f)
	if n := len(p.SvcHealth.Services); n != 2 {
		t.Errorf("SyncServices called %d times, want a retry after the failure (2)", n)
	}
	mustSync(t, f)
	if n := len(p.SvcHealth.Services); n != 2 {
		t.Errorf("SyncServices called %d times, want no call once it succeeded (2)", n)
	}
}

func healthUpdatedOncePerSuccessfulSync(t *testing.T, newFixture NewFixture) {
	f, p := started(t, newFixture, nil)
	p.State.UpdateEndpointSlice(nil, Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, Ready("10.0.3.1", "node-c")))
	mustSync(t, f)
	p.State.UpdateEndpointSlice(nil, Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, Ready("10.0.3.2", "node-c")))
	mustFailSync(t, f)
	mustSync(t, f)
	if got := p.Health.Count(v1.IPv4Protocol); got != 3 {
		t.Errorf("health Updated %d times for 3 successful syncs", got)
	}
	if got := p.Health.Count(v1.IPv6Protocol); got != 0 {
		t.Errorf("health Updated for the wrong family")
	}
}

func optionalDependenciesMayBeNil(t *testing.T, newFixture NewFixture) {
	f, p := started(t, newFixture, func(c *proxycore.Config) {
		c.Metrics, c.Health, c.ServiceHealth, c.Conntrack, c.Clock = nil, nil, nil, nil, nil
	})
	p.State.UpdateEndpointSlice(nil, Slice("ns1", "dns", "dns-1", 5353, "dns", v1.ProtocolUDP, Ready("10.0.3.1", "node-c")))
	p.State.OnServiceDelete(Service("ns1", "web", "172.30.0.10", WithPort("http", v1.ProtocolTCP, 80, 8080)))
	// A failed write, recovered from by the next sync, needs none of them either.
	mustFailSync(t, f)
	mustSync(t, f)
	f.CheckFullRender(t, nil)
}

func invalidDataIsSkipped(t *testing.T, newFixture NewFixture) {
	recorder := events.NewFakeRecorder(10)
	f := newFixture(t, func(c *proxycore.Config) { c.Recorder = recorder })
	p := f.Fakes()
	p.AddStandardServices()
	p.State.OnServiceAdd(Service("ns3", "bad", "not-an-ip", WithPort("", v1.ProtocolTCP, 80, 8080)))
	mustSync(t, f)
	f.CheckFullRender(t, nil)
	if strings.Contains(f.Programmed(), "ns3") {
		t.Errorf("the invalid Service was programmed")
	}
	select {
	case e := <-recorder.Events:
		if !strings.HasPrefix(e, "Warning InvalidData") || !strings.Contains(e, "not-an-ip") {
			t.Errorf("event %q, want a Warning InvalidData naming the bad value", e)
		}
	default:
		t.Errorf("no event recorded for the invalid Service")
	}
}
