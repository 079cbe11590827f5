//go:build linux

package cleanup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/ipvs"
	"github.com/kproxy/kproxy/internal/testing/netnsexec"
	"github.com/kproxy/kproxy/internal/testing/roottest"
)

// nsExec runs every command inside one network namespace (netnsexec.Exec).
type nsExec struct{ netnsexec.Exec }

func (e nsExec) mustRun(t *testing.T, stdin string, cmd string, args ...string) string {
	t.Helper()
	c := e.Command(cmd, args...)
	if stdin != "" {
		c.SetStdin(strings.NewReader(stdin))
	}
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %q in %s: %v: %s", cmd, args, e.NS, err, out)
	}
	return string(out)
}

func requireRootAndTools(t *testing.T, tools ...string) {
	t.Helper()
	roottest.Require(t, "creates a network namespace and programs iptables/nftables in it", tools...)
}

// newTestNetns creates a uniquely named namespace, deleted on every path.
func newTestNetns(t *testing.T) (string, netns.NsHandle) {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("kpl-%d-cln-%s", os.Getpid(), hex.EncodeToString(b))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("deleting netns %s: %v: %s", name, err, out)
		}
	})
	h, err := netns.GetFromName(name)
	if err != nil {
		t.Fatalf("opening netns %s: %v", name, err)
	}
	t.Cleanup(func() { h.Close() })
	return name, h
}

// nftInNetns puts an "nft" first on PATH that runs the real one inside ns,
// so knftables.New (which has no exec hook) acts in the namespace.
func nftInNetns(t *testing.T, ns string) {
	t.Helper()
	real, err := exec.LookPath("nft")
	if err != nil {
		t.Skipf("needs nft: %v", err)
	}
	dir := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\nexec ip netns exec %s %s \"$@\"\n", ns, real)
	if err := os.WriteFile(filepath.Join(dir, "nft"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

const foreignNFT = `
table ip kube-proxy {
	set cluster-ips {
		type ipv4_addr
		elements = { 10.96.0.1 }
	}
	chain services {
		ip daddr @cluster-ips counter
	}
	chain nat-prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		jump services
	}
}
table ip6 kube-proxy {
	chain services {
	}
	chain filter-input {
		type filter hook input priority -110; policy accept;
		jump services
	}
}
table inet other-fw {
	chain input {
		type filter hook input priority 0; policy accept;
		tcp dport 2222 accept
	}
}
table ip other-nat {
	chain prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		tcp dport 8022 redirect to :22
	}
}
`

// testIPSets are the sets the ipvs-mode dump references, plus twins and
// other software's sets.
var testIPSets = []struct{ name, spec string }{
	{"KUBE-CLUSTER-IP", "hash:ip,port"},
	{"KUBE-LOOP-BACK", "hash:ip,port,ip"},
	{"KUBE-NODE-PORT-TCP", "bitmap:port range 0-65535"},
	{"KUBE-HEALTH-CHECK-NODE-PORT", "bitmap:port range 0-65535"},
	{"KUBE-LOAD-BALANCER", "hash:ip,port"},
	{"KUBE-LOAD-BALANCER-FW", "hash:ip,port"},
	{"KUBE-IPVS-IPS", "hash:ip"},
	{"KUBE-6-CLUSTER-IP", "hash:ip,port family inet6"},
	{"OTHER-SET", "hash:ip"},
	{"KUBE-NOT-KUBE-PROXY", "hash:ip"},
}

func TestIntegrationCleanupAllInNetns(t *testing.T) {
	for _, backend := range []iptables.Backend{iptables.BackendNFT, iptables.BackendLegacy} {
		t.Run(string(backend), func(t *testing.T) {
			requireRootAndTools(t, "ip", "nft", "ipset",
				"iptables-"+string(backend)+"-restore", "ip6tables-"+string(backend)+"-restore",
				"iptables-"+string(backend)+"-save", "ip6tables-"+string(backend)+"-save")
			ns, nsHandle := newTestNetns(t)
			nsx := nsExec{netnsexec.Exec{NS: ns}}
			nftInNetns(t, ns)

			// Leftovers of every mode, and other software's state.
			for _, s := range testIPSets {
				nsx.mustRun(t, "", "ipset", append([]string{"create", s.name}, strings.Fields(s.spec)...)...)
			}
			restore4, restore6 := "iptables-"+string(backend)+"-restore", "ip6tables-"+string(backend)+"-restore"
			nsx.mustRun(t, readTestdata(t, "iptables-mode.save"), restore4, "--noflush")
			nsx.mustRun(t, readTestdata(t, "ipvs-mode.save"), restore4, "--noflush")
			nsx.mustRun(t, readTestdata(t, "iptables-mode-v6.save"), restore6, "--noflush")
			nsx.mustRun(t, foreignNFT, "nft", "-f", "-")
			// Other software's dummy-like link; kube-ipvs0 only where the
			// kernel has the dummy driver.
			nsx.mustRun(t, "", "ip", "link", "add", "other0", "type", "bridge")
			haveDummy := addDummy(t, nsx, ipvsDummyLink)

			// The kubelet's hint chain is in this backend only.
			if got := iptables.DetectBackend(context.Background(), nsx); got != backend {
				t.Fatalf("DetectBackend = %q, want %q", got, backend)
			}

			save := func(family v1.IPFamily) *iptables.Fake {
				t.Helper()
				tool := "iptables-" + string(backend) + "-save"
				if family == v1.IPv6Protocol {
					tool = "ip6tables-" + string(backend) + "-save"
				}
				f := iptables.NewFake(family)
				if err := f.Load(nsx.mustRun(t, "", tool)); err != nil {
					t.Fatalf("parsing %s output: %v", tool, err)
				}
				return f
			}
			before4, before6 := foreignState(save(v1.IPv4Protocol)), foreignState(save(v1.IPv6Protocol))
			if !save(v1.IPv4Protocol).HasChain(tableNAT, "KUBE-SERVICES") || !save(v1.IPv6Protocol).HasChain(tableFilter, "KUBE-SERVICES") {
				t.Fatal("leftovers were not installed")
			}

			links, err := netlink.NewHandleAt(nsHandle)
			if err != nil {
				t.Fatal(err)
			}
			defer links.Close()
			table := ipvs.New("/run/netns/" + ns)
			defer func() { _ = table.Close() }()
			deps := Deps{
				Exec:   nsx,
				Links:  links,
				IPVS:   table,
				IPSets: ipset.New(nsx),
				// NewNFTables defaults to knftables.New, which finds the
				// namespaced nft first on PATH.
			}
			if err := All(context.Background(), deps); err != nil {
				t.Fatalf("All: %v", err)
			}

			// iptables: none of ours left; other software's and the
			// kubelet's chains and rules exactly as before.
			for _, tc := range []struct {
				family v1.IPFamily
				before map[string][]string
			}{{v1.IPv4Protocol, before4}, {v1.IPv6Protocol, before6}} {
				after := save(tc.family)
				if got := foreignState(after); fmt.Sprint(got) != fmt.Sprint(tc.before) {
					t.Errorf("%s: foreign state changed:\nbefore %v\nafter  %v", tc.family, tc.before, got)
				}
				dump := after.DumpAll()
				for _, line := range strings.Split(dump, "\n") {
					if strings.HasPrefix(line, ":KUBE-") {
						chain := strings.Fields(line[1:])[0]
						if !slices.Contains([]string{"KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY", "KUBE-FIREWALL"}, chain) {
							t.Errorf("%s: chain %s survived", tc.family, chain)
						}
					}
				}
				if !strings.Contains(dump, "-A OTHER-FW -p tcp -m tcp --dport 2222 -j ACCEPT") {
					t.Errorf("%s: other software's rule is gone:\n%s", tc.family, dump)
				}
			}

			// nftables: the kube-proxy tables are gone, the others intact.
			tables := nsx.mustRun(t, "", "nft", "list", "tables")
			for _, gone := range []string{"table ip kube-proxy", "table ip6 kube-proxy"} {
				if strings.Contains(tables, gone) {
					t.Errorf("%s survived:\n%s", gone, tables)
				}
			}
			for _, kept := range []string{"table inet other-fw", "table ip other-nat"} {
				if !strings.Contains(tables, kept) {
					t.Errorf("%s was removed:\n%s", kept, tables)
				}
			}
			if rules := nsx.mustRun(t, "", "nft", "list", "table", "inet", "other-fw"); !strings.Contains(rules, "tcp dport 2222 accept") {
				t.Errorf("other-fw rule gone:\n%s", rules)
			}

			// ipvs: our sets and dummy link are gone, the others are not.
			sets := strings.Fields(nsx.mustRun(t, "", "ipset", "list", "-n"))
			slices.Sort(sets)
			if want := []string{"KUBE-NOT-KUBE-PROXY", "OTHER-SET"}; !slices.Equal(sets, want) {
				t.Errorf("remaining ipsets = %v, want %v", sets, want)
			}
			if _, err := links.LinkByName(ipvsDummyLink); haveDummy && err == nil {
				t.Error("kube-ipvs0 survived")
			}
			if _, err := links.LinkByName("other0"); err != nil {
				t.Errorf("other0 was removed: %v", err)
			}

			// Idempotent: a second run on the cleaned namespace succeeds.
			if err := All(context.Background(), deps); err != nil {
				t.Errorf("second All: %v", err)
			}
		})
	}
}

// addDummy creates a dummy link, reporting false when the kernel has no
// dummy driver.
func addDummy(t *testing.T, nsx nsExec, name string) bool {
	t.Helper()
	out, err := nsx.Command("ip", "link", "add", name, "type", "dummy").CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "Unknown device type") {
			t.Logf("kernel has no dummy links; kube-ipvs0 deletion covered by unit tests only")
			return false
		}
		t.Fatalf("ip link add %s type dummy: %v: %s", name, err, out)
	}
	return true
}

func TestIntegrationNonDummyKubeIPVS0IsKept(t *testing.T) {
	requireRootAndTools(t, "ip")
	ns, nsHandle := newTestNetns(t)
	nsx := nsExec{netnsexec.Exec{NS: ns}}
	nsx.mustRun(t, "", "ip", "link", "add", ipvsDummyLink, "type", "bridge")
	links, err := netlink.NewHandleAt(nsHandle)
	if err != nil {
		t.Fatal(err)
	}
	defer links.Close()
	table := ipvs.New("/run/netns/" + ns)
	defer func() { _ = table.Close() }()
	err = cleanupIPVSKernel(context.Background(), table, links)
	if err == nil || !strings.Contains(err.Error(), "not dummy") {
		t.Errorf("cleanupIPVSKernel = %v, want a not-dummy error", err)
	}
	if _, err := links.LinkByName(ipvsDummyLink); err != nil {
		t.Errorf("a bridge named kube-ipvs0 is not ours but was removed: %v", err)
	}
}

func TestIntegrationNetlinkIPVSInNetns(t *testing.T) {
	requireRootAndTools(t, "ip")
	ns, _ := newTestNetns(t)
	table := ipvs.New("/run/netns/" + ns)
	defer func() { _ = table.Close() }()
	// Where the kernel has IPVS, a virtual server to flush.
	vs := ipvs.VirtualServer{Address: netip.MustParseAddr("10.96.0.1"), Protocol: v1.ProtocolTCP, Port: 443, Scheduler: "rr"}
	if table.Available() == nil {
		if err := table.AddVirtualServer(vs); err != nil {
			t.Fatal(err)
		}
	}
	err := cleanupIPVSKernel(context.Background(), table, nil)
	if err != nil {
		t.Fatalf("cleanupIPVSKernel: %v", err)
	}
	if vss, err := table.VirtualServers(); err == nil && len(vss) != 0 {
		t.Errorf("virtual servers left: %v", vss)
	} else if err != nil && !errors.Is(err, ErrIPVSUnavailable) {
		t.Errorf("VirtualServers: %v", err)
	} else {
		t.Logf("IPVS in a fresh namespace after the cleanup: %v", err)
	}
}
