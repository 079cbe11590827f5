package app

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/config"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// TestLocalhostNodePortsDecision: upstream's conditions per family. The gate off
// renders nothing; on, the proxy serves a family only when the expanded
// nodePortAddresses explicitly include loopback for it.
func TestLocalhostNodePortsDecision(t *testing.T) {
	localhost := expandNodePortAddresses([]string{config.NodePortAddressesLocalhost}, nil)
	all := expandNodePortAddresses([]string{config.NodePortAddressesAll}, nil)
	for _, tc := range []struct {
		name   string
		gate   bool
		addrs  []string
		v4, v6 render.LocalhostNodePorts
	}{
		{"gate off", false, localhost, render.LocalhostNodePorts{}, render.LocalhostNodePorts{}},
		{"localhost", true, localhost, render.LocalhostNodePorts{Enabled: true, Proxied: true}, render.LocalhostNodePorts{Enabled: true, Proxied: true}},
		{"all", true, all, render.LocalhostNodePorts{Enabled: true}, render.LocalhostNodePorts{Enabled: true}},
		{"IPv4 loopback only", true, []string{"127.0.0.1/32", "192.168.0.0/16"}, render.LocalhostNodePorts{Enabled: true, Proxied: true}, render.LocalhostNodePorts{Enabled: true}},
	} {
		fg, err := config.NewFeatureGate()
		if err != nil {
			t.Fatal(err)
		}
		if err := fg.SetFromMap(map[string]bool{string(config.KubeProxyNFTablesLocalhostNodePorts): tc.gate}); err != nil {
			t.Fatal(err)
		}
		cfg := &config.Config{FeatureGates: fg}
		for family, want := range map[v1.IPFamily]render.LocalhostNodePorts{v1.IPv4Protocol: tc.v4, v1.IPv6Protocol: tc.v6} {
			if got := localhostNodePorts(familyParams{cfg: cfg, family: family, nodePortAddrs: tc.addrs}); got != want {
				t.Errorf("%s, %s: %+v, want %+v", tc.name, family, got, want)
			}
		}
	}
}
