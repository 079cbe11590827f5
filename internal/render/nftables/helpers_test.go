package nftables

import (
	"context"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
)

var update = flag.Bool("update", false, "rewrite the expected files under testdata/")

func testConfig(family knftables.Family) *Config {
	if family == knftables.IPv6Family {
		return &Config{
			Family:            family,
			NodePortAddresses: model.NodePortAddresses{IPs: []netip.Addr{netip.MustParseAddr("fd00::2")}},
			LocalDetector:     model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("fd10::/64")}},
			MasqueradeBit:     14,
			ServiceCIDRs:      []netip.Prefix{netip.MustParsePrefix("fd30::/108")},
			NodeIP:            netip.MustParseAddr("fd00::2"),
		}
	}
	return &Config{
		Family:            family,
		NodePortAddresses: model.NodePortAddresses{IPs: []netip.Addr{netip.MustParseAddr("192.168.0.2"), netip.MustParseAddr("127.0.0.1")}},
		LocalDetector:     model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
		MasqueradeBit:     14,
		ServiceCIDRs:      []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16")},
		NodeIP:            netip.MustParseAddr("192.168.0.2"),
	}
}

// svcPort builds a ClusterIP ServicePort; mutate the result for other types.
func svcPort(ns, name, portName string, proto v1.Protocol, clusterIP string, port int32) *model.ServicePort {
	return &model.ServicePort{
		Name:      model.ServicePortName{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}, Port: portName, Protocol: proto},
		ClusterIP: netip.MustParseAddr(clusterIP),
		Port:      port,
		Protocol:  proto,
	}
}

func ep(ip string, port int32, local bool) *model.Endpoint {
	return &model.Endpoint{IP: netip.MustParseAddr(ip), Port: port, Ready: true, Serving: true, IsLocal: local}
}

func terminating(e *model.Endpoint) *model.Endpoint {
	e.Ready, e.Serving, e.Terminating = false, true, true
	return e
}

// view categorizes endpoints as upstream's CategorizeEndpoints does (minus topology):
// ready endpoints, else serving-terminating ones.
func view(sp *model.ServicePort, eps ...*model.Endpoint) *model.ServicePortView {
	usable := func(filter func(*model.Endpoint) bool) []*model.Endpoint {
		var ready, term []*model.Endpoint
		for _, e := range eps {
			if !filter(e) {
				continue
			}
			if e.Ready {
				ready = append(ready, e)
			} else if e.Serving && e.Terminating {
				term = append(term, e)
			}
		}
		if len(ready) > 0 {
			return ready
		}
		return term
	}
	v := &model.ServicePortView{ServicePort: sp}
	all := usable(func(*model.Endpoint) bool { return true })
	v.HasAnyEndpoints = len(all) > 0
	if sp.UsesClusterEndpoints() {
		v.ClusterEndpoints = all
	}
	if sp.UsesLocalEndpoints() {
		v.LocalEndpoints = usable(func(e *model.Endpoint) bool { return e.IsLocal })
	}
	seen := map[*model.Endpoint]bool{}
	for _, e := range append(append([]*model.Endpoint{}, v.ClusterEndpoints...), v.LocalEndpoints...) {
		if !seen[e] {
			seen[e] = true
			v.AllReachableEndpoints = append(v.AllReachableEndpoints, e)
		}
	}
	return v
}

func renderAll(cfg *Config, views ...*model.ServicePortView) *State {
	base := RenderBase(cfg)
	services := map[model.ServicePortName]*Fragment{}
	for _, v := range views {
		f := RenderService(cfg, v)
		services[v.Name] = &f
	}
	return NewState(&base, services)
}

// programFull renders views, writes a full sync into a new Fake and runs it.
func programFull(t testing.TB, cfg *Config, views ...*model.ServicePortView) (*knftables.Fake, *State) {
	t.Helper()
	fake := knftables.NewFake(cfg.Family, TableName)
	st := renderAll(cfg, views...)
	tx := fake.NewTransaction()
	WriteFull(tx, st)
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatalf("full sync failed: %v\n%s", err, tx.String())
	}
	return fake, st
}

// checkGolden compares got with testdata/name, or rewrites it with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading expected output (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got; run with -update to accept):\n%s", path, diff)
	}
}

func goldenName(s string) string {
	return strings.NewReplacer(" ", "-", "/", "-").Replace(strings.ToLower(s)) + ".nft"
}
