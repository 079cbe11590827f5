package nftnetlink

import (
	"net/netip"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
	render "github.com/kproxy/kproxy/internal/render/nftables"
	"github.com/kproxy/kproxy/internal/render/rendertest"
)

// The shared test vocabulary (internal/render/rendertest, internal/testing/golden).
var (
	svcPort     = rendertest.ServicePort
	ep          = rendertest.Endpoint
	terminating = rendertest.Terminating
	view        = rendertest.View
	scaleView   = rendertest.ScaleView
	scaleViews  = rendertest.ScaleViews
)

// These helpers mirror the renderer's own test helpers (internal/render/nftables
// helpers_test.go, plan_test.go), which are not importable.

func testConfig(family knftables.Family) *render.Config {
	if family == knftables.IPv6Family {
		return &render.Config{
			Family:            family,
			NodePortAddresses: model.NodePortAddresses{IPs: []netip.Addr{netip.MustParseAddr("fd00::2")}},
			LocalDetector:     model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("fd10::/64")}},
			MasqueradeBit:     14,
			ServiceCIDRs:      []netip.Prefix{netip.MustParsePrefix("fd30::/108")},
			NodeIP:            netip.MustParseAddr("fd00::2"),
		}
	}
	return &render.Config{
		Family:            family,
		NodePortAddresses: model.NodePortAddresses{IPs: []netip.Addr{netip.MustParseAddr("192.168.0.2"), netip.MustParseAddr("127.0.0.1")}},
		LocalDetector:     model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
		MasqueradeBit:     14,
		ServiceCIDRs:      []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16")},
		NodeIP:            netip.MustParseAddr("192.168.0.2"),
	}
}

func renderState(cfg *render.Config, views []*model.ServicePortView) *render.State {
	base := render.RenderBase(cfg)
	return render.NewState(&base, render.RenderServices(cfg, views))
}

func fragment(cfg *render.Config, v *model.ServicePortView) *render.Fragment {
	f := render.RenderService(cfg, v)
	return &f
}
