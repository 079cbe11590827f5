package app

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/config"
	"github.com/kproxy/kproxy/internal/model"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// Semantics of upstream's getLocalDetectors (cmd/kube-proxy/app/server_linux.go),
// per family.
func TestLocalDetector(t *testing.T) {
	cases := []struct {
		name     string
		cfg      config.Config
		podCIDRs []string
		want     map[v1.IPFamily]model.LocalDetector
	}{
		{
			name: "no mode detects nothing",
			cfg:  config.Config{ClusterCIDRs: prefixList("10.0.0.0/14")},
			want: map[v1.IPFamily]model.LocalDetector{v1.IPv4Protocol: {}, v1.IPv6Protocol: {}},
		},
		{
			name: "ClusterCIDR single-stack",
			cfg:  config.Config{DetectLocalMode: config.LocalModeClusterCIDR, ClusterCIDRs: prefixList("10.0.0.0/14")},
			want: map[v1.IPFamily]model.LocalDetector{
				v1.IPv4Protocol: {Mode: model.DetectClusterCIDR, CIDRs: prefixList("10.0.0.0/14")},
				v1.IPv6Protocol: {},
			},
		},
		{
			name: "ClusterCIDR dual-stack, first CIDR of each family",
			cfg: config.Config{DetectLocalMode: config.LocalModeClusterCIDR,
				ClusterCIDRs: prefixList("2002:0:0:1234::/64", "10.0.0.0/14", "10.8.0.0/14", "fd00::/64")},
			want: map[v1.IPFamily]model.LocalDetector{
				v1.IPv4Protocol: {Mode: model.DetectClusterCIDR, CIDRs: prefixList("10.0.0.0/14")},
				v1.IPv6Protocol: {Mode: model.DetectClusterCIDR, CIDRs: prefixList("2002:0:0:1234::/64")},
			},
		},
		{
			name: "ClusterCIDR without any CIDR",
			cfg:  config.Config{DetectLocalMode: config.LocalModeClusterCIDR},
			want: map[v1.IPFamily]model.LocalDetector{v1.IPv4Protocol: {}, v1.IPv6Protocol: {}},
		},
		{
			name:     "NodeCIDR dual-stack",
			cfg:      config.Config{DetectLocalMode: config.LocalModeNodeCIDR, ClusterCIDRs: prefixList("10.0.0.0/8")},
			podCIDRs: []string{"10.0.3.0/24", "2002::1234:abcd:ffff:0:0/96"},
			want: map[v1.IPFamily]model.LocalDetector{
				v1.IPv4Protocol: {Mode: model.DetectNodeCIDR, CIDRs: prefixList("10.0.3.0/24")},
				v1.IPv6Protocol: {Mode: model.DetectNodeCIDR, CIDRs: prefixList("2002::1234:abcd:ffff:0:0/96")},
			},
		},
		{
			name:     "NodeCIDR masks and skips unparsable entries",
			cfg:      config.Config{DetectLocalMode: config.LocalModeNodeCIDR},
			podCIDRs: []string{"garbage", "10.0.3.7/24"},
			want: map[v1.IPFamily]model.LocalDetector{
				v1.IPv4Protocol: {Mode: model.DetectNodeCIDR, CIDRs: prefixList("10.0.3.0/24")},
				v1.IPv6Protocol: {},
			},
		},
		{
			name: "NodeCIDR without pod CIDRs",
			cfg:  config.Config{DetectLocalMode: config.LocalModeNodeCIDR, ClusterCIDRs: prefixList("10.0.0.0/8")},
			want: map[v1.IPFamily]model.LocalDetector{v1.IPv4Protocol: {}, v1.IPv6Protocol: {}},
		},
		{
			name: "BridgeInterface serves both families",
			cfg:  config.Config{DetectLocalMode: config.LocalModeBridgeInterface, DetectLocal: config.DetectLocal{BridgeInterface: "eth"}},
			want: map[v1.IPFamily]model.LocalDetector{
				v1.IPv4Protocol: {Mode: model.DetectBridgeInterface, BridgeInterface: "eth"},
				v1.IPv6Protocol: {Mode: model.DetectBridgeInterface, BridgeInterface: "eth"},
			},
		},
		{
			name: "InterfaceNamePrefix serves both families",
			cfg:  config.Config{DetectLocalMode: config.LocalModeInterfaceNamePrefix, DetectLocal: config.DetectLocal{InterfaceNamePrefix: "veth"}},
			want: map[v1.IPFamily]model.LocalDetector{
				v1.IPv4Protocol: {Mode: model.DetectInterfaceNamePrefix, InterfaceNamePrefix: "veth"},
				v1.IPv6Protocol: {Mode: model.DetectInterfaceNamePrefix, InterfaceNamePrefix: "veth"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for family, want := range tc.want {
				got := localDetector(&tc.cfg, family, tc.podCIDRs)
				if diff := cmp.Diff(want, got, cmpopts.EquateEmpty(), cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
					t.Errorf("%s (-want +got):\n%s", family, diff)
				}
				// Whatever is returned must be a valid renderer configuration.
				rc := render.Config{Family: "ip", LocalDetector: got}
				if family == v1.IPv6Protocol {
					rc.Family = "ip6"
				}
				if err := rc.Validate(); err != nil {
					t.Errorf("%s: detector rejected by the renderer: %v", family, err)
				}
			}
		})
	}
}
