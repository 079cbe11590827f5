package ipvs

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/clock"

	"github.com/kproxy/kproxy/internal/dataplane/dptest"
	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/ipvs"
	"github.com/kproxy/kproxy/internal/ipvs/dummy"
	"github.com/kproxy/kproxy/internal/metrics"
	"github.com/kproxy/kproxy/internal/model"
	ipt "github.com/kproxy/kproxy/internal/render/iptables"
	render "github.com/kproxy/kproxy/internal/render/ipvs"
)

var errInjected = errors.New("injected failure")

// nodeIPs are the fake node's addresses (besides kube-ipvs0's).
var nodeIPs = []netip.Addr{netip.MustParseAddr(dptest.NodeIP)}

// fixture is an IPv4 Proxier over fakes of every kernel boundary.
type fixture struct {
	*dptest.Parts
	t       *testing.T
	proxier *Proxier
	ipvs    *ipvs.Fake
	sets    *ipset.Fake
	link    *dummy.Fake
	ipt     *iptables.Fake
}

func testRenderConfig() render.Config {
	return render.Config{
		Family:            "IPv4",
		MasqueradeBit:     14,
		LocalDetector:     model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
		NodePortAddresses: model.NodePortAddresses{IPs: nodeIPs},
		NodeIP:            nodeIPs[0],
	}
}

func newFixture(t *testing.T, mutate ...func(*Config)) *fixture {
	t.Helper()
	f := &fixture{t: t, Parts: dptest.NewParts(t, metrics.ModeIPVS, dptest.NodeName),
		ipvs: ipvs.NewFake(), sets: ipset.NewFake(), link: dummy.NewFake(nodeIPs...), ipt: iptables.NewFake("IPv4")}
	cfg := Config{Config: f.CoreConfig(), Render: testRenderConfig(), IPVS: f.ipvs, IPSet: f.sets, Link: f.link, IPT: f.ipt,
		Graceful: ipvs.NewGracefulTermination(f.ipvs, clock.RealClock{}, 0)}
	for _, m := range mutate {
		m(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.proxier = p
	return f
}

func (f *fixture) sync() {
	f.t.Helper()
	if _, err := f.Sync(context.Background()); err != nil {
		f.t.Fatalf("Sync: %v", err)
	}
}

// kernel writes what the fakes hold in the notation of render.Desired.Dump's
// first three parts (addresses, virtual servers, sets), without the comments
// naming ServicePorts, which the kernel does not keep.
func (f *fixture) kernel() string {
	t := f.t
	t.Helper()
	addrs, err := f.link.Addresses()
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	vss, err := f.ipvs.VirtualServers()
	if err != nil {
		t.Fatal(err)
	}
	d := &render.Desired{Addresses: addrs}
	for _, vs := range vss {
		reals, err := f.ipvs.RealServers(vs.Key())
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(reals, func(a, b ipvs.RealServer) int { return a.AddrPort().Compare(b.AddrPort()) })
		vs.Flags &^= ipvs.FlagHashed
		d.Services = append(d.Services, render.Service{VS: vs, Reals: reals})
	}
	slices.SortFunc(d.Services, func(a, b render.Service) int { return render.CompareKeys(a.VS.Key(), b.VS.Key()) })
	saved, err := f.sets.Save(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range render.Sets("IPv4") {
		d.Sets = append(d.Sets, ipset.Contents{Set: s, Entries: saved[s.Name]})
	}
	return withoutComments(d.Dump())
}

// withoutComments drops the ServicePort comments of a dump and its rules part.
func withoutComments(dump string) string {
	dump, _, _ = strings.Cut(dump, "# iptables-save\n")
	var b strings.Builder
	for _, l := range strings.SplitAfter(dump, "\n") {
		if i := strings.Index(l, "  # "); i >= 0 {
			l = l[:i] + "\n"
		}
		b.WriteString(l)
	}
	return b.String()
}

// want is what a new proxier would program for the model with cfg.
func (f *fixture) want(cfg render.Config) *render.Desired {
	cfg.HostAddresses = nodeIPs
	return render.Render(&cfg, slices.Collect(f.State.Views()))
}

// checkKernel fails unless the fakes hold exactly what a fresh render programs.
func (f *fixture) checkKernel(cfg render.Config) {
	f.t.Helper()
	want := f.want(cfg)
	if got, w := f.kernel(), withoutComments(want.Dump()); got != w {
		f.t.Errorf("kernel differs from a fresh render:\n--- got\n%s--- want\n%s", got, w)
	}
	var rules strings.Builder
	for _, table := range []iptables.Table{iptables.TableNAT, iptables.TableFilter} {
		for _, c := range render.Chains(ipt.Table(table)) {
			if !f.ipt.HasChain(table, iptables.Chain(c)) {
				rules.WriteString("missing " + string(table) + " chain " + c + "\n")
			}
		}
	}
	if rules.Len() > 0 {
		f.t.Error(rules.String())
	}
}

// The dptest.Fixture methods.

func (f *fixture) Sync(ctx context.Context) (bool, error) {
	defer f.failWrites(nil)
	return f.proxier.Sync(ctx)
}

// failWrites makes every kernel write fail with err (nil: succeed).
func (f *fixture) failWrites(err error) {
	for _, m := range []string{"AddVirtualServer", "UpdateVirtualServer", "DeleteVirtualServer", "AddRealServer", "UpdateRealServer", "DeleteRealServer"} {
		f.ipvs.SetError(m, err)
	}
	f.sets.SetError("Restore", err)
	f.link.SetError("AddAddress", err)
	f.link.SetError("DeleteAddress", err)
	f.ipt.FailAlways(iptables.OpRestore, err)
}

func (f *fixture) FailNextSync() { f.failWrites(errInjected) }

// Writes counts the kernel operations of the syncs so far (each sync records
// how many it wrote).
func (f *fixture) Writes() int {
	n := 0
	for _, r := range f.proxier.Inspectable().Syncs() {
		n += r.Operations
	}
	return n
}

// LastWriteWasFull reports whether the last sync that wrote listed the kernel.
func (f *fixture) LastWriteWasFull() bool {
	for _, r := range f.proxier.Inspectable().Syncs() {
		if r.Wrote {
			return r.Full
		}
	}
	return false
}

func (f *fixture) CheckFullRender(t *testing.T, nodePortIPs []netip.Addr) {
	t.Helper()
	cfg := testRenderConfig()
	if nodePortIPs != nil {
		cfg.NodePortAddresses.IPs = nodePortIPs
	}
	f.checkKernel(cfg)
}

func (f *fixture) Programmed() string { return f.kernel() + f.ipt.DumpAll() }

func (f *fixture) Inspectable() proxycore.Inspectable { return f.proxier.Inspectable() }
