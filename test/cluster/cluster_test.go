package cluster

import (
	"encoding/json"
	"net/netip"
	"regexp"
	"strings"
	"testing"
)

func TestSelectSpecs(t *testing.T) {
	all := []Spec{
		{Name: "[sig-network] Services should serve a basic endpoint from pods [Conformance]"},
		{Name: "[sig-network] Services should have session affinity timeout work for NodePort service [LinuxOnly]"},
		{Name: "[sig-network] Networking Granular Checks: Services should update nodePort: http [Slow]"},
		{Name: "[sig-network] Netpol NetworkPolicy between server and client should deny ingress"},
		{Name: "[sig-node] Pods should be submitted and removed"},
		{Name: "[sig-network] DNS should provide DNS for services [Conformance]"},
	}
	names := func(s []Spec) []string {
		var out []string
		for _, x := range s {
			out = append(out, x.Name)
		}
		return out
	}
	full, err := SelectSpecs(all, SpecsFull)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(full); len(got) != 2 || !strings.Contains(got[0], "DNS") || !strings.Contains(got[1], "basic endpoint") {
		t.Errorf("full = %q", got)
	}
	slow, err := SelectSpecs(all, SpecsSlow)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(slow); len(got) != 2 {
		t.Errorf("slow = %q, want the [Slow] one and the affinity timeout one", got)
	}
	short, err := SelectSpecs(all, SpecsShort)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(short); len(got) != 2 {
		t.Errorf("short = %q", got)
	}
	if _, err := SelectSpecs(all, "nope"); err == nil {
		t.Error("unknown set: no error")
	}
	if _, err := SelectSpecs(all[3:5], SpecsFull); err == nil {
		t.Error("empty selection: no error")
	}
}

func TestFocusRegexpMatchesExactlyTheSpecs(t *testing.T) {
	specs := []Spec{{Name: "[sig-network] Services should work (a) [Disruptive]"}, {Name: "[sig-network] DNS should x"}}
	re := regexp.MustCompile(FocusRegexp(specs))
	for _, s := range specs {
		if !re.MatchString("Kubernetes e2e suite " + s.Name) {
			t.Errorf("%q does not match its own focus", s.Name)
		}
	}
	for _, other := range []string{"[sig-network] Services should work (a) [Disruptive] more", "x[sig-network] DNS should x", "[sig-network] DNS should"} {
		if re.MatchString("Kubernetes e2e suite " + other) {
			t.Errorf("%q matches the focus", other)
		}
	}
}

func TestRegressionsAndTable(t *testing.T) {
	cols := []Column{
		{Proxy: "upstream", Mode: "nftables", Results: []SpecResult{{Name: "a", State: "passed", Seconds: 3}, {Name: "b", State: "failed", Failure: "no sctp"}, {Name: "c", State: "passed"}}},
		{Proxy: "kproxy", Mode: "nftables", Results: []SpecResult{{Name: "a", State: "passed", Seconds: 2}, {Name: "b", State: "passed"}}},
	}
	reg := Regressions(cols)
	if len(reg) != 1 || !strings.Contains(reg[0], "not run") || !strings.HasSuffix(reg[0], ": c") {
		t.Errorf("regressions = %q, want c not run", reg)
	}
	var b strings.Builder
	if err := WriteTable(&b, cols); err != nil {
		t.Fatal(err)
	}
	want := "| spec | upstream nftables | kproxy nftables |\n|---|---|---|\n| **passed / failed / skipped** | 2 / 1 / 0 | 2 / 0 / 0 |\n" +
		"| a | pass (3s) | pass (2s) |\n| b | failed | pass (0s) |\n| c | pass (0s) | not run |\n" +
		"\n## The specs that did not pass, and why\n\nThe first line of ginkgo's failure or skip message, for each run that did not pass the spec.\n\n" +
		"- b\n  - upstream nftables (failed): no sctp\n- c\n  - kproxy nftables (not run)\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestProxyConfigMapEditsDeployOnce(t *testing.T) {
	c := &Cluster{opts: Options{DeployDir: "../../deploy"}}
	c.CP.V4 = netip.MustParseAddr("192.0.2.10")
	got, err := c.proxyConfigMap(ProxyConfig{Mode: "nftables"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"server: https://192.0.2.10:6443",
		"clusterCIDR: 10.244.0.0/16,fd00:10:244::/56",
		"maxPerCore: 0",
		"min: 0",
		"    mode: nftables",
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("ConfigMap lacks %q", want)
		}
	}
	blank, err := c.proxyConfigMap(ProxyConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(blank), `    mode: ""`) {
		t.Error(`blank mode is not written as mode: ""`)
	}
	ds, err := c.proxyManifest("registry.k8s.io/kube-proxy:v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ds), "image: registry.k8s.io/kube-proxy:v1.37.2\n") || strings.Contains(string(ds), "image: kproxy.local") {
		t.Error("DaemonSet image not replaced")
	}
}

func TestCNIConfig(t *testing.T) {
	b, err := cniConfig([]netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")})
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Plugins []struct {
			Type string
			IPAM struct {
				Ranges [][]struct{ Subnet string }
				Routes []struct{ Dst string }
			}
		}
	}
	if err := json.Unmarshal(b, &conf); err != nil {
		t.Fatal(err)
	}
	p := conf.Plugins[0]
	if p.Type != "ptp" || len(p.IPAM.Ranges) != 2 || p.IPAM.Ranges[1][0].Subnet != "fd00:10:244:1::/64" || p.IPAM.Routes[1].Dst != "::/0" {
		t.Errorf("conf = %s", b)
	}
}

func TestMemberAddrs(t *testing.T) {
	v4, v6 := memberAddrs(11)
	if v4.String() != "192.0.2.11" || v6.String() != "2001:db8:1::11" {
		t.Errorf("memberAddrs(11) = %s, %s", v4, v6)
	}
}
