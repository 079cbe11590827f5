package differential

import (
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kproxy/kproxy/internal/ipvs"
)

// The VM's share of the corpus: the ipvs mode's --cleanup with live state and its
// lab run (TestDifferentialInVM).
func TestCorpusHasVMCases(t *testing.T) {
	cases, _ := loadInputs(t)
	var cleanup, lab int
	for _, c := range cases {
		if !c.VM {
			continue
		}
		if c.Cleanup && c.Seed == SeedIPVS {
			cleanup++
		}
		if c.Lab != nil && slices.Contains(c.Lab.Compare, AspectMetrics) {
			lab++
		}
	}
	if cleanup < 2 || lab == 0 {
		t.Errorf("corpus has %d ipvs-seeded cleanup and %d metrics lab VM cases; want at least 2 and 1", cleanup, lab)
	}
	f, err := os.Open(filepath.Join(IPVSSeedDir, "virtual-servers.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if vss, err := ParseVirtualServers(f); err != nil || len(vss) == 0 {
		t.Errorf("the ipvs seed's virtual servers: %d, %v", len(vss), err)
	}
}

func TestCaseCheckSeed(t *testing.T) {
	base := Case{Name: "x", About: "x", Args: []string{"--cleanup"}, Compare: []Aspect{AspectCleanup}, Cleanup: true}
	for name, mod := range map[string]func(*Case){
		"unknown seed":         func(c *Case) { c.Seed, c.VM = "bogus", true },
		"ipvs seed outside VM": func(c *Case) { c.Seed = SeedIPVS },
		"seed without cleanup": func(c *Case) { c.Seed, c.VM, c.Cleanup, c.Compare = SeedIPVS, true, false, []Aspect{AspectExit} },
	} {
		c := base
		mod(&c)
		if err := c.check("x"); err == nil {
			t.Errorf("%s: passed the check", name)
		}
	}
	ok := base
	ok.Seed, ok.VM = SeedIPVS, true
	if err := ok.check("x"); err != nil {
		t.Errorf("an ipvs-seeded VM case refused: %v", err)
	}
}

func TestAllowanceVMOnly(t *testing.T) {
	cases := []*Case{{Name: "mode-ipvs"}, {Name: "vm-mode-ipvs", VM: true}, {Name: "vm-cleanup-ipvs", VM: true}}
	for _, tc := range []struct {
		glob string
		want bool
	}{
		{"vm-*", true}, {"vm-mode-ipvs", true}, {"*", false}, {"", false}, {"*mode-ipvs", false}, {"nothing", false},
	} {
		if got := (Allowance{Case: tc.glob}).VMOnly(cases); got != tc.want {
			t.Errorf("VMOnly(case %q) = %t, want %t", tc.glob, got, tc.want)
		}
	}
}

func TestParseVirtualServers(t *testing.T) {
	got, err := ParseVirtualServers(strings.NewReader(`# comment
-A -t 10.96.0.1:443 -s rr
-a -t 10.96.0.1:443 -r 192.0.2.1:6443 -m -w 1
-A -u [fd00::1]:53 -s sh -p 600
-a -u [fd00::1]:53 -r [fd00::2]:53 -m -w 3
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []SeedVirtualServer{
		{VirtualServer: ipvs.VirtualServer{Address: netip.MustParseAddr("10.96.0.1"), Protocol: "TCP", Port: 443, Scheduler: "rr"},
			Real: []ipvs.RealServer{{Address: netip.MustParseAddr("192.0.2.1"), Port: 6443, Weight: 1}}},
		{VirtualServer: ipvs.VirtualServer{Address: netip.MustParseAddr("fd00::1"), Protocol: "UDP", Port: 53, Scheduler: "sh", Flags: ipvs.FlagPersistent, Timeout: 600},
			Real: []ipvs.RealServer{{Address: netip.MustParseAddr("fd00::2"), Port: 53, Weight: 3}}},
	}
	if !slices.EqualFunc(got, want, func(a, b SeedVirtualServer) bool {
		return a.VirtualServer == b.VirtualServer && slices.Equal(a.Real, b.Real)
	}) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{"-a -t 10.0.0.1:1 -r 10.0.0.2:1", "-A -t 10.0.0.1", "-A -x 1", "-E -t 10.0.0.1:1"} {
		if _, err := ParseVirtualServers(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestParseIPSetSave(t *testing.T) {
	got := ParseIPSetSave(`create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0xb10cf7fe
add KUBE-CLUSTER-IP 10.96.220.255,tcp:80
add KUBE-CLUSTER-IP 10.96.0.1,tcp:443
create KUBE-NODE-PORT-TCP bitmap:port range 0-65535
`)
	want := map[string]string{
		"ipset KUBE-CLUSTER-IP":    "hash:ip,port family inet hashsize 1024 maxelem 65536 bucketsize 12 | 10.96.0.1,tcp:443 | 10.96.220.255,tcp:80",
		"ipset KUBE-NODE-PORT-TCP": "bitmap:port range 0-65535",
	}
	if !maps.Equal(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

func TestParseLinks(t *testing.T) {
	got, err := ParseLinks(`[{"ifname":"lo","flags":["LOOPBACK","UP"],"addr_info":[{"local":"127.0.0.1","prefixlen":8}]},
{"ifname":"kube-ipvs0","flags":["BROADCAST","NOARP"],"linkinfo":{"info_kind":"dummy"},
 "addr_info":[{"local":"10.96.220.255","prefixlen":32},{"local":"10.96.0.1","prefixlen":32}]}]`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"link kube-ipvs0": "kind dummy down | 10.96.0.1/32 | 10.96.220.255/32"}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
