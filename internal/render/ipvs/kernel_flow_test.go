package ipvs

import (
	"errors"
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/ipvs"
	"github.com/kproxy/kproxy/internal/render/rendertest"
	"github.com/kproxy/kproxy/internal/trace/ipvstrace"
)

// TestKernelFlows programs every flow scenario into a private network namespace
// as the proxier does on a first sync (the sets and their entries with ipset
// restore, the chains with iptables-restore, the jumps, the virtual and real
// servers over netlink), reads it back as the kernel lists it (iptables-save
// --counters, ipset save, the virtual servers over netlink: what `kube-proxy
// trace` reads) and traces the same flows through that: each must give what it
// gives on the rendered state, outcome by outcome. A kernel without IPVS (this
// host's) skips; the 6.1 VM runs it (docs/vm.md).
func TestKernelFlows(t *testing.T) {
	backends := map[v1.IPFamily][]string{
		v1.IPv4Protocol: rendertest.IptablesBackends(t, v1.IPv4Protocol),
		v1.IPv6Protocol: rendertest.IptablesBackends(t, v1.IPv6Protocol),
	}
	for _, sc := range ipvsScenarios() {
		cfg := testConfig(sc.fam())
		v6 := sc.fam() == v1.IPv6Protocol
		for _, b := range backends[sc.fam()] {
			t.Run(b+"/"+sc.name, func(t *testing.T) {
				ns := rendertest.Netns(t, "ipvsf")
				if _, err := rendertest.RunIn(ns, nil, "ip", "link", "set", "lo", "up"); err != nil {
					t.Fatal(err)
				}
				h := ipvs.New("/run/netns/" + ns)
				t.Cleanup(func() { _ = h.Close() })
				if err := h.Available(); errors.Is(err, ipvs.ErrUnavailable) {
					t.Skipf("this kernel has no IPVS: %v", err)
				}
				rendered := programmedState(t, cfg, sc.views)
				fromKernel := programKernel(t, ns, h, b, cfg.Family, Render(cfg, sc.views), rendered.Local)
				for _, f := range sc.flows {
					got, err := traceIPVSFlow(t, fromKernel, v6, f)
					if err != nil {
						t.Fatalf("%s: %v", f.name, err)
					}
					want, err := traceIPVSFlow(t, rendered, v6, f)
					if err != nil {
						t.Fatalf("%s: %v", f.name, err)
					}
					if g, w := rendertest.DescribeOutcomes(got), rendertest.DescribeOutcomes(want); g != w {
						t.Errorf("%s: the kernel's state gives\n%s\nthe rendered state gives\n%s\ntrace:\n%s", f.name, g, w, got.TraceString())
					}
				}
			})
		}
	}
}

// programKernel writes d into ns as the proxier's first sync does (sets and
// entries, chains and jumps, virtual and real servers) and reads it back as the
// kernel lists it.
func programKernel(t *testing.T, ns string, h *ipvs.Netlink, backend string, family v1.IPFamily, d *Desired, local []netip.Addr) *ipvstrace.State {
	t.Helper()
	if out, err := rendertest.RunIn(ns, ipset.Plan(d.Sets, nil), "ipset", "restore", "-exist"); err != nil {
		t.Fatalf("ipset restore: %v: %s", err, out)
	}
	restoreRules(t, ns, backend, family, d)
	for _, s := range d.Services {
		if err := h.AddVirtualServer(s.VS); err != nil {
			t.Fatal(err)
		}
		for _, rs := range s.Reals {
			if err := h.AddRealServer(s.VS.Key(), rs); err != nil {
				t.Fatal(err)
			}
		}
	}
	save, err := rendertest.RunIn(ns, nil, rendertest.IptablesBinary(backend, family, "-save"), "--counters")
	if err != nil {
		t.Fatal(err)
	}
	setsText, err := rendertest.RunIn(ns, nil, "ipset", "save")
	if err != nil {
		t.Fatal(err)
	}
	sets, err := ipset.ParseSaveSets([]byte(setsText))
	if err != nil {
		t.Fatal(err)
	}
	st := &ipvstrace.State{Save: []byte(save), Sets: sets, Local: local}
	vss, err := h.VirtualServers()
	if err != nil {
		t.Fatal(err)
	}
	for _, vs := range vss {
		reals, err := h.RealServers(vs.Key())
		if err != nil {
			t.Fatal(err)
		}
		st.Services = append(st.Services, ipvstrace.Service{VS: vs, Reals: reals})
	}
	return st
}
