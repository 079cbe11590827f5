package ipvs

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/render/rendertest"
	"github.com/kproxy/kproxy/internal/testing/golden"
)

// The shared test vocabulary (internal/render/rendertest, internal/testing/golden).
var (
	addrs       = rendertest.Addrs
	prefixes    = rendertest.Prefixes
	svcPort     = rendertest.ServicePort
	ep          = rendertest.Endpoint
	terminating = rendertest.Terminating
	view        = rendertest.View
	checkGolden = golden.Check
)

func goldenName(s string) string { return golden.Name(s, ".ipvs") }

// testConfig is the node of the upstream tests where they have one: node IP
// 100.101.102.103 (2001:db8::1:1), pods in 10.0.0.0/8 (fd10::/64).
func testConfig(family v1.IPFamily) *Config {
	if family == v1.IPv6Protocol {
		return &Config{
			Family:            family,
			MasqueradeBit:     14,
			LocalDetector:     model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: prefixes("fd10::/64")},
			NodePortAddresses: model.NodePortAddresses{IPs: addrs("2001:db8::1:1", "::1")},
			NodeIP:            netip.MustParseAddr("2001:db8::1:1"),
			HostAddresses:     addrs("2001:db8::1:1", "2001:db8::99"),
		}
	}
	return &Config{
		Family:        family,
		MasqueradeBit: 14,
		LocalDetector: model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: prefixes("10.0.0.0/8")},
		// Loopback is never a NodePort address in the ipvs mode.
		NodePortAddresses: model.NodePortAddresses{IPs: addrs("100.101.102.103", "127.0.0.1")},
		NodeIP:            netip.MustParseAddr("100.101.102.103"),
		// 192.168.99.22 is local on the node: an externalIP there is not bound.
		HostAddresses: addrs("100.101.102.103", "192.168.1.2", "192.168.99.22"),
	}
}

// nodePortService is upstream's usual "ns1/svc1:p80" NodePort Service.
func nodePortService() *model.ServicePort {
	sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "10.20.30.41", 80)
	sp.NodePort = 3001
	return sp
}

func views(vs ...*model.ServicePortView) func() []*model.ServicePortView {
	return func() []*model.ServicePortView { return vs }
}
