package ipvs

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/dataplane/dptest"
	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/ipvs"
)

var (
	webKey     = ipvs.Key{Address: netip.MustParseAddr("172.30.0.10"), Protocol: v1.ProtocolTCP, Port: 80}
	foreignVS  = ipvs.VirtualServer{Address: netip.MustParseAddr("192.0.2.80"), Protocol: v1.ProtocolTCP, Port: 80, Scheduler: "rr"}
	excludedVS = ipvs.VirtualServer{Address: netip.MustParseAddr("198.51.100.80"), Protocol: v1.ProtocolTCP, Port: 80, Scheduler: "rr"}
)

// callsSince returns the fake IPVS calls after the first n.
func callsSince(f *fixture, n int) []string { return f.ipvs.Calls()[n:] }

// TestFirstSyncProgramsEverything: the first sync lists the kernel and programs
// the standard Services as a fresh render says, with the jumps from the built-in
// chains.
func TestFirstSyncProgramsEverything(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.sync()
	f.checkKernel(testRenderConfig())
	if !f.link.LinkExists() {
		t.Error("kube-ipvs0 was not created")
	}
	if !slices.Contains(f.ipvs.Calls(), "VirtualServers") {
		t.Error("the first sync did not list the kernel's virtual servers")
	}
	for _, jump := range []struct {
		table iptables.Table
		chain string
	}{{iptables.TableNAT, "PREROUTING"}, {iptables.TableNAT, "OUTPUT"}, {iptables.TableNAT, "POSTROUTING"}, {iptables.TableFilter, "INPUT"}} {
		if !strings.Contains(f.ipt.Dump(jump.table), "-A "+jump.chain+" ") {
			t.Errorf("no jump from %s %s", jump.table, jump.chain)
		}
	}
}

// TestPartialSyncWritesTheDifference: an endpoint change writes only its real
// servers, lists nothing, and leaves the rules alone.
func TestPartialSyncWritesTheDifference(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.sync()
	restores := f.ipt.Calls(iptables.OpRestore)
	n := len(f.ipvs.Calls())
	old := dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.1.1", dptest.NodeName), dptest.Ready("10.0.2.1", "node-b"))
	f.State.UpdateEndpointSlice(old, dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP,
		dptest.Ready("10.0.1.1", dptest.NodeName), dptest.Ready("10.0.2.9", "node-b")))
	f.sync()
	got := callsSince(f, n)
	want := []string{
		"AddRealServer TCP 172.30.0.10:80 10.0.2.9:8080 weight 1",
		"RealServers TCP 172.30.0.10:80", // graceful termination looks at the connections
		"DeleteRealServer TCP 172.30.0.10:80 10.0.2.1:8080",
	}
	if !slices.Equal(got, want) {
		t.Errorf("IPVS calls of the partial sync:\n got %q\nwant %q", got, want)
	}
	if f.ipt.Calls(iptables.OpRestore) != restores {
		t.Error("the partial sync restored unchanged rules")
	}
	f.checkKernel(testRenderConfig())
}

// TestFullSyncRepairsAndDeletesStale: a full sync puts back what someone removed,
// deletes the family's virtual servers no Service renders, except in
// ExcludeCIDRs, and leaves the other family's alone (upstream's
// cleanLegacyService).
func TestFullSyncRepairsAndDeletesStale(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ExcludeCIDRs = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")} })
	v6 := ipvs.VirtualServer{Address: netip.MustParseAddr("2001:db8::80"), Protocol: v1.ProtocolTCP, Port: 80, Scheduler: "rr"}
	for _, vs := range []ipvs.VirtualServer{foreignVS, excludedVS, v6} {
		if err := f.ipvs.AddVirtualServer(vs); err != nil {
			t.Fatal(err)
		}
	}
	f.AddStandardServices()
	f.sync()
	if err := f.ipvs.DeleteVirtualServer(webKey); err != nil {
		t.Fatal(err)
	}
	f.proxier.RequestFullSync()
	f.sync()
	f.checkKernelWith(t, excludedVS.Key(), v6.Key())
}

// checkKernelWith checks the kernel against a fresh render, with extra virtual
// servers that must have been kept.
func (f *fixture) checkKernelWith(t *testing.T, kept ...ipvs.Key) {
	t.Helper()
	for _, k := range kept {
		if err := f.ipvs.DeleteVirtualServer(k); err != nil {
			t.Errorf("virtual server %s was not kept: %v", k, err)
		}
	}
	f.checkKernel(testRenderConfig())
}

// TestGracefulTermination: a removed real server with connections gets weight 0
// and stays; when its endpoint comes back it is added afresh with weight 1.
func TestGracefulTermination(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.sync()
	gone := netip.MustParseAddrPort("10.0.2.1:8080")
	if err := f.ipvs.SetConnections(webKey, gone, 1, 0); err != nil {
		t.Fatal(err)
	}
	both := dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.1.1", dptest.NodeName), dptest.Ready("10.0.2.1", "node-b"))
	one := dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.1.1", dptest.NodeName))
	f.State.UpdateEndpointSlice(both, one)
	f.sync()
	weight := func() int {
		reals, err := f.ipvs.RealServers(webKey)
		if err != nil {
			t.Fatal(err)
		}
		for _, rs := range reals {
			if rs.AddrPort() == gone {
				return rs.Weight
			}
		}
		return -1
	}
	if w := weight(); w != 0 {
		t.Fatalf("terminating real server with a connection: weight %d, want 0 (kept)", w)
	}
	// A full sync does not re-weight it.
	f.proxier.RequestFullSync()
	f.sync()
	if w := weight(); w != 0 {
		t.Fatalf("a full sync re-weighted a terminating real server: weight %d", w)
	}
	f.State.UpdateEndpointSlice(one, both)
	f.sync()
	if w := weight(); w != 1 {
		t.Errorf("real server whose endpoint came back: weight %d, want 1", w)
	}
	f.checkKernel(testRenderConfig())
}

// TestFailedWritesDoNotStopTheOthers: a kernel refusing every real server still
// gets every virtual server, the sync fails, and the next one (full) repairs.
func TestFailedWritesDoNotStopTheOthers(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.ipvs.SetError("AddRealServer", errInjected)
	if _, err := f.proxier.Sync(context.Background()); err == nil {
		t.Fatal("Sync succeeded with every real server refused")
	}
	f.ipvs.SetError("AddRealServer", nil)
	vss, err := f.ipvs.VirtualServers()
	if err != nil {
		t.Fatal(err)
	}
	if want := len(f.want(testRenderConfig()).Services); len(vss) != want {
		t.Errorf("%d virtual servers after the failed sync, want all %d", len(vss), want)
	}
	f.sync()
	if !f.LastWriteWasFull() {
		t.Error("the sync after a failure was not full")
	}
	f.checkKernel(testRenderConfig())
}

// TestNothingChangedWritesNothing: a sync without changes makes no kernel call.
func TestNothingChangedWritesNothing(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.sync()
	n, restores := len(f.ipvs.Calls()), f.ipt.Calls(iptables.OpRestore)
	wrote, err := f.proxier.Sync(context.Background())
	if err != nil || wrote {
		t.Fatalf("Sync without changes: wrote=%t err=%v", wrote, err)
	}
	if got := callsSince(f, n); len(got) > 0 || f.ipt.Calls(iptables.OpRestore) != restores {
		t.Errorf("a sync without changes called the kernel: %q", got)
	}
}

// TestFullSyncKeepsTheOtherFamilysAddresses: kube-ipvs0 is shared by both
// families' proxiers; an IPv4 full sync unbinds stale IPv4 addresses but leaves
// the IPv6 proxier's (a dual-stack node lost its IPv4 ClusterIPs after the IPv6
// full sync that followed a switch back from nftables mode, in the 6.1 VM).
func TestFullSyncKeepsTheOtherFamilysAddresses(t *testing.T) {
	f := newFixture(t)
	v6, staleV4 := netip.MustParseAddr("fd00:10:96::1"), netip.MustParseAddr("10.96.200.200")
	if err := f.link.EnsureLink(); err != nil {
		t.Fatal(err)
	}
	for _, a := range []netip.Addr{v6, staleV4} {
		if err := f.link.AddAddress(a); err != nil {
			t.Fatal(err)
		}
	}
	f.AddStandardServices()
	f.sync()
	bound, err := f.link.Addresses()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(bound, v6) {
		t.Errorf("the IPv4 full sync unbound the IPv6 proxier's %s; kube-ipvs0 holds %v", v6, bound)
	}
	if slices.Contains(bound, staleV4) {
		t.Errorf("the IPv4 full sync left the stale %s bound; kube-ipvs0 holds %v", staleV4, bound)
	}
}
