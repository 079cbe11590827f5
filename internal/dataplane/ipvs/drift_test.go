package ipvs

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/dataplane/dptest"
	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/ipvs"
)

var dnsKey = ipvs.Key{Address: netip.MustParseAddr("172.30.0.53"), Protocol: v1.ProtocolUDP, Port: 53}

// checkDifferences fails unless the differences are want, in order.
func checkDifferences(t *testing.T, f *fixture, want ...string) {
	t.Helper()
	if got := dptest.Differences(t, f.proxier.Verify); !slices.Equal(got, want) {
		t.Errorf("differences:\n got %q\nwant %q", got, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestVerify: right after a sync the kernel holds what was applied; a kernel
// edited behind the proxier's back (a virtual server deleted, one changed, a real
// server added, one re-weighted, a set entry deleted, an address unbound, a chain
// flushed, a jump deleted) is each the difference it is, and a full sync repairs
// every one.
func TestVerify(t *testing.T) {
	f := newFixture(t)
	if _, err := f.proxier.Verify(context.Background()); !errors.Is(err, proxycore.ErrNothingApplied) {
		t.Fatalf("Verify before the first sync: %v, want ErrNothingApplied", err)
	}
	f.AddStandardServices()
	f.sync()
	checkDifferences(t, f)

	ctx := context.Background()
	lbKey := ipvs.Key{Address: netip.MustParseAddr("172.30.0.20"), Protocol: v1.ProtocolTCP, Port: 80}
	must(t, f.ipvs.DeleteVirtualServer(webKey))
	must(t, f.ipvs.UpdateVirtualServer(ipvs.VirtualServer{Address: lbKey.Address, Protocol: lbKey.Protocol, Port: lbKey.Port,
		Scheduler: "wrr", Flags: ipvs.FlagPersistent, Timeout: 600}))
	must(t, f.ipvs.AddRealServer(lbKey, ipvs.RealServer{Address: netip.MustParseAddr("10.0.9.9"), Port: 8080, Weight: 1}))
	must(t, f.ipvs.UpdateRealServer(dnsKey, ipvs.RealServer{Address: netip.MustParseAddr("10.0.1.2"), Port: 5353, Weight: 7}))
	must(t, f.sets.Restore(ctx, []byte("del KUBE-CLUSTER-IP 172.30.0.53,udp:53\n")))
	must(t, f.link.DeleteAddress(netip.MustParseAddr("172.30.0.10")))
	must(t, f.ipt.FlushChain(ctx, iptables.TableNAT, "KUBE-SERVICES"))
	must(t, f.ipt.DeleteRule(ctx, iptables.TableNAT, "POSTROUTING", "-m", "comment", "--comment", "kubernetes postrouting rules", "-j", "KUBE-POSTROUTING"))
	got := dptest.Differences(t, f.proxier.Verify)
	want := []string{
		"changed element KUBE-CLUSTER-IP: 1 missing, 0 extra of 3; missing 172.30.0.53,udp:53",
		"missing address kube-ipvs0: 172.30.0.10",
		"missing virtual server TCP 172.30.0.10:80",
		"changed virtual server TCP 172.30.0.20:80: scheduler wrr, applied rr; flags 0x1, applied 0x0; persistence timeout 600 s, applied 0 s",
		"extra real server TCP 172.30.0.20:80: 10.0.9.9:8080 (weight 1)",
		"changed real server UDP 172.30.0.53:53: 10.0.1.2:5353: weight 7, applied 1",
		"changed rule nat KUBE-SERVICES: ",
		"missing rule nat POSTROUTING: the jump to KUBE-POSTROUTING",
	}
	if len(got) != len(want) {
		t.Fatalf("differences:\n%s\nwant %d:\n%s", strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("difference %d = %q, want it to start with %q", i, got[i], want[i])
		}
	}

	f.proxier.RequestFullSync()
	f.sync()
	checkDifferences(t, f)
	f.checkKernel(testRenderConfig())
}

// TestVerifyMissingObjects: a deleted set and a deleted kube-ipvs0 are one
// difference each (not one per entry or address), and a virtual server of the
// family that no Service renders is extra, as the full sync deletes it
// (upstream's cleanLegacyService).
func TestVerifyMissingObjects(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.sync()
	f.sets.SetInUse("KUBE-CLUSTER-IP", false)
	must(t, f.sets.Destroy(context.Background(), "KUBE-CLUSTER-IP"))
	must(t, f.link.DeleteLink())
	must(t, f.ipvs.AddVirtualServer(foreignVS))
	checkDifferences(t, f,
		"missing set KUBE-CLUSTER-IP",
		"missing link kube-ipvs0",
		"extra virtual server TCP 192.0.2.80:80",
	)
	f.proxier.RequestFullSync()
	f.sync()
	checkDifferences(t, f)
}

// TestVerifyLeavesWhatIsNotDrift: real servers in graceful termination, virtual
// servers in ExcludeCIDRs and of the other family, other software's sets, set
// entries, chains and rules, and the other family's addresses on kube-ipvs0 are
// not differences.
func TestVerifyLeavesWhatIsNotDrift(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ExcludeCIDRs = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")} })
	f.AddStandardServices()
	f.sync()
	gone := netip.MustParseAddrPort("10.0.2.1:8080")
	must(t, f.ipvs.SetConnections(webKey, gone, 1, 0))
	both := dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.1.1", dptest.NodeName), dptest.Ready("10.0.2.1", "node-b"))
	one := dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.1.1", dptest.NodeName))
	f.State.UpdateEndpointSlice(both, one)
	f.sync()
	if !f.proxier.cfg.Graceful.InTerminationList(webKey, gone) {
		t.Fatal("the removed real server with a connection is not terminating")
	}

	ctx := context.Background()
	v6 := ipvs.VirtualServer{Address: netip.MustParseAddr("2001:db8::80"), Protocol: v1.ProtocolTCP, Port: 80, Scheduler: "rr"}
	for _, vs := range []ipvs.VirtualServer{excludedVS, v6} {
		must(t, f.ipvs.AddVirtualServer(vs))
	}
	must(t, f.sets.Restore(ctx, []byte("create OTHER hash:ip family inet hashsize 1024 maxelem 65536\nadd OTHER 192.0.2.1\n")))
	must(t, f.link.AddAddress(netip.MustParseAddr("fd00:10:96::1")))
	_, err := f.ipt.EnsureChain(ctx, iptables.TableNAT, "OTHER-CHAIN")
	must(t, err)
	_, err = f.ipt.EnsureRule(ctx, false, iptables.TableNAT, "PREROUTING", "-j", "OTHER-CHAIN")
	must(t, err)
	checkDifferences(t, f)
}

// TestDriftCheckRepairs: the background comparison finds a deleted virtual
// server a period after the last full sync, records it (LastDrift, the
// metrics), requests a full sync and triggers it, which repairs it.
func TestDriftCheckRepairs(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.DriftCheckPeriod = 30 * time.Second })
	triggered := dptest.RunDriftChecks(t, f.proxier.RunDriftChecks)
	f.AddStandardServices()
	f.sync()
	must(t, f.ipvs.DeleteVirtualServer(webKey))
	f.Clock.Step(30 * time.Second)
	dptest.WaitTriggered(t, triggered)
	if r := f.proxier.core.LastDrift(); r == nil || r.Count != 1 || r.Differences[0].Kind != "virtual server" {
		t.Fatalf("LastDrift = %+v, want the deleted virtual server", r)
	}
	if v := dptest.Value(t, f.Registry, "kubeproxy_kproxy_drift_objects", dptest.IPv4Label); v != 1 {
		t.Errorf("kubeproxy_kproxy_drift_objects = %v, want 1", v)
	}
	f.sync()
	if !f.LastWriteWasFull() {
		t.Error("the sync the drift check requested was not full")
	}
	checkDifferences(t, f)
	f.checkKernel(testRenderConfig())
	if v := dptest.Value(t, f.Registry, "kubeproxy_kproxy_drift_repairs_total", dptest.IPv4Label); v != 1 {
		t.Errorf("kubeproxy_kproxy_drift_repairs_total = %v, want 1", v)
	}
}

// syncingSets is an ipset.Interface whose Save, while armed, first runs a sync
// that writes: a sync in the middle of a comparison's listing.
type syncingSets struct {
	ipset.Interface
	armed bool
	sync  func()
}

func (s *syncingSets) Save(ctx context.Context) (map[string][]string, error) {
	if s.armed {
		s.sync()
	}
	return s.Interface.Save(ctx)
}

// TestVerifyWhileASyncWrites: a comparison during whose listing a sync wrote is
// inconclusive and made again (the applied state it would compare with is not
// the one the listing saw); when syncs keep writing, Verify gives up with
// ErrInconclusive.
func TestVerifyWhileASyncWrites(t *testing.T) {
	sets := &syncingSets{Interface: ipset.NewFake()}
	f := newFixture(t, func(c *Config) { c.IPSet = sets })
	f.AddStandardServices()
	f.sync()
	both := dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.1.1", dptest.NodeName), dptest.Ready("10.0.2.1", "node-b"))
	one := dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.1.1", dptest.NodeName))
	current, syncs := both, 0
	toggle := func() {
		next := one
		if current == one {
			next = both
		}
		f.State.UpdateEndpointSlice(current, next)
		current = next
		syncs++
		f.sync()
	}
	sets.sync = func() {
		if syncs == 0 {
			toggle()
		}
	}
	sets.armed = true
	checkDifferences(t, f)
	if syncs != 1 {
		t.Fatalf("%d syncs during the comparison, want 1", syncs)
	}
	sets.sync = toggle
	if _, err := f.proxier.Verify(context.Background()); !errors.Is(err, proxycore.ErrInconclusive) {
		t.Fatalf("Verify while every listing sees a sync write: %v, want ErrInconclusive", err)
	}
}
