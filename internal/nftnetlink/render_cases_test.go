package nftnetlink

import (
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
	render "github.com/kproxy/kproxy/internal/render/nftables"
	"github.com/kproxy/kproxy/internal/render/rendertest"
	"github.com/kproxy/kproxy/internal/testing/golden"
)

// The shared test vocabulary (internal/render/rendertest, internal/testing/golden).
var (
	addrs    = rendertest.Addrs
	prefixes = rendertest.Prefixes
)

func goldenName(s string) string { return golden.Name(s, ".nft") }

// The renderer's expected-output cases (internal/render/nftables render_test.go,
// localhost_test.go), which are not importable, rebuilt here so that the typed rules
// they render can be encoded. TestRenderCasesMatchGolden holds the copy to the
// original: each case must print exactly the rules of its expected-output file.

type renderCase struct {
	name   string
	family knftables.Family
	config func(*render.Config)
	views  func() []*model.ServicePortView
}

// renderCases are the expected-output cases, each also with Config.EndpointMaps
// (files "maps-<name>.nft").
func renderCases() []renderCase {
	cases := ruleRenderCases()
	for _, c := range ruleRenderCases() {
		mutate := c.config
		c.name = "maps/" + c.name
		c.config = func(cfg *render.Config) {
			if mutate != nil {
				mutate(cfg)
			}
			cfg.EndpointMaps = true
		}
		cases = append(cases, c)
	}
	return cases
}

func ruleRenderCases() []renderCase {
	v4, v6 := knftables.IPv4Family, knftables.IPv6Family
	nodePort := func() *model.ServicePort {
		sp := svcPort("ns2", "svc2", "p80", v1.ProtocolTCP, "172.30.0.42", 80)
		sp.NodePort = 3001
		return sp
	}
	return []renderCase{
		{name: "base ipv4", family: v4},
		{name: "base ipv6", family: v6},
		{name: "clusterip protocols", family: v4, views: func() []*model.ServicePortView {
			return []*model.ServicePortView{
				view(svcPort("ns1", "svc1", "tcp", v1.ProtocolTCP, "172.30.0.41", 80), ep("10.180.0.1", 8080, false)),
				view(svcPort("ns1", "svc1", "udp", v1.ProtocolUDP, "172.30.0.41", 53), ep("10.180.0.1", 5353, false), ep("10.180.0.2", 5353, true)),
				view(svcPort("ns1", "svc1", "sctp", v1.ProtocolSCTP, "172.30.0.41", 7777), ep("10.180.0.3", 7777, false)),
			}
		}},
		{name: "multiple ports", family: v4, views: func() []*model.ServicePortView {
			return []*model.ServicePortView{
				view(svcPort("ns1", "svc1", "http", v1.ProtocolTCP, "172.30.0.41", 80), ep("10.180.0.1", 8080, false), ep("10.180.0.2", 8080, false)),
				view(svcPort("ns1", "svc1", "https", v1.ProtocolTCP, "172.30.0.41", 443), ep("10.180.0.1", 8443, false), ep("10.180.0.2", 8443, false)),
			}
		}},
		{name: "nodeport node ips", family: v4, views: func() []*model.ServicePortView {
			return []*model.ServicePortView{view(nodePort(), ep("10.180.0.2", 80, false))}
		}},
		{name: "nodeport all addresses", family: v4,
			config: func(c *render.Config) { c.NodePortAddresses = model.NodePortAddresses{All: true} },
			views: func() []*model.ServicePortView {
				return []*model.ServicePortView{view(nodePort(), ep("10.180.0.2", 80, false))}
			}},
		{name: "loadbalancer source ranges", family: v4, views: func() []*model.ServicePortView {
			sp := nodePort()
			sp.LoadBalancerVIPs = addrs("1.2.3.4")
			sp.LoadBalancerSourceRanges = prefixes("203.0.113.0/25", "192.168.0.0/24")
			return []*model.ServicePortView{view(sp, ep("10.180.0.2", 80, false))}
		}},
		{name: "external ips", family: v4, views: func() []*model.ServicePortView {
			sp := svcPort("ns3", "svc3", "p80", v1.ProtocolTCP, "172.30.0.43", 80)
			sp.ExternalIPs = addrs("192.168.99.33")
			return []*model.ServicePortView{view(sp, ep("10.180.0.3", 80, false))}
		}},
		{name: "session affinity", family: v4, views: func() []*model.ServicePortView {
			sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80)
			sp.StickyMaxAgeSeconds = 10800
			return []*model.ServicePortView{view(sp, ep("10.180.0.1", 80, false), ep("10.180.0.2", 80, true))}
		}},
		{name: "endpoint map above rules max", family: v4,
			config: func(c *render.Config) { c.EndpointRulesMax = 2 },
			views: func() []*model.ServicePortView {
				aff := svcPort("ns2", "svc2", "p80", v1.ProtocolTCP, "172.30.0.42", 80)
				aff.StickyMaxAgeSeconds = 10800
				eps := []*model.Endpoint{ep("10.180.0.1", 80, false), ep("10.180.0.2", 80, true), ep("10.180.0.3", 80, false)}
				return []*model.ServicePortView{
					view(svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80), eps...),
					view(aff, eps...),
				}
			}},
		{name: "internal traffic policy local", family: v4, views: func() []*model.ServicePortView {
			sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80)
			sp.InternalPolicyLocal = true
			none := svcPort("ns1", "svc2", "p80", v1.ProtocolTCP, "172.30.0.42", 80)
			none.InternalPolicyLocal = true
			return []*model.ServicePortView{
				view(sp, ep("10.180.0.1", 80, false), ep("10.180.0.2", 80, true)),
				view(none, ep("10.180.0.3", 80, false)),
			}
		}},
		{name: "external traffic policy local", family: v4, views: func() []*model.ServicePortView {
			with := nodePort()
			with.ExternalPolicyLocal = true
			with.LoadBalancerVIPs = addrs("1.2.3.4")
			with.HealthCheckNodePort = 30000
			without := svcPort("ns3", "svc3", "p80", v1.ProtocolTCP, "172.30.0.43", 80)
			without.NodePort = 3003
			without.ExternalPolicyLocal = true
			without.LoadBalancerVIPs = addrs("5.6.7.8")
			return []*model.ServicePortView{
				view(with, ep("10.180.0.1", 80, false), ep("10.180.0.2", 80, true)),
				view(without, ep("10.180.0.3", 80, false)),
			}
		}},
		{name: "no endpoints", family: v4, views: func() []*model.ServicePortView {
			sp := nodePort()
			sp.ExternalIPs = addrs("192.168.99.22")
			sp.LoadBalancerVIPs = addrs("1.2.3.4")
			return []*model.ServicePortView{view(sp)}
		}},
		{name: "only terminating endpoints", family: v4, views: func() []*model.ServicePortView {
			return []*model.ServicePortView{view(svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80),
				terminating(ep("10.180.0.1", 80, false)), terminating(ep("10.180.0.2", 80, true)))}
		}},
		{name: "masquerade all", family: v4,
			config: func(c *render.Config) { c.MasqueradeAll = true },
			views: func() []*model.ServicePortView {
				return []*model.ServicePortView{view(svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80), ep("10.180.0.1", 80, false))}
			}},
		{name: "detector none", family: v4, config: func(c *render.Config) { c.LocalDetector = model.LocalDetector{} }},
		{name: "detector node cidr", family: v4, config: func(c *render.Config) {
			c.LocalDetector = model.LocalDetector{Mode: model.DetectNodeCIDR, CIDRs: prefixes("10.0.1.0/24")}
		}},
		{name: "detector bridge", family: v4, config: func(c *render.Config) {
			c.LocalDetector = model.LocalDetector{Mode: model.DetectBridgeInterface, BridgeInterface: "cbr0"}
		}},
		{name: "detector interface prefix", family: v4, config: func(c *render.Config) {
			c.LocalDetector = model.LocalDetector{Mode: model.DetectInterfaceNamePrefix, InterfaceNamePrefix: "veth"}
		}},
		{name: "ipv6 services", family: v6, views: func() []*model.ServicePortView {
			sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "fd30::41", 80)
			sp.NodePort = 3001
			sp.LoadBalancerVIPs = addrs("2001:db8::1")
			sp.LoadBalancerSourceRanges = prefixes("2001:db8:1::/64")
			aff := svcPort("ns1", "svc2", "p53", v1.ProtocolUDP, "fd30::42", 53)
			aff.StickyMaxAgeSeconds = 300
			return []*model.ServicePortView{
				view(sp, ep("fd10::1", 8080, true), ep("fd10::2", 8080, false)),
				view(aff, ep("fd10::3", 53, false)),
			}
		}},
		{name: "localhost nodeports", family: v4,
			config: func(c *render.Config) { c.LocalhostNodePorts = render.LocalhostNodePorts{Enabled: true} },
			views:  func() []*model.ServicePortView { return localhostNodePortViews(v4) }},
		{name: "localhost nodeports proxied", family: v4,
			config: func(c *render.Config) { c.LocalhostNodePorts = render.LocalhostNodePorts{Enabled: true, Proxied: true} },
			views:  func() []*model.ServicePortView { return localhostNodePortViews(v4) }},
		{name: "localhost nodeports ipv6", family: v6,
			config: func(c *render.Config) { c.LocalhostNodePorts = render.LocalhostNodePorts{Enabled: true, Proxied: true} },
			views:  func() []*model.ServicePortView { return localhostNodePortViews(v6) }},
	}
}

func (c *renderCase) build() (*render.Config, []*model.ServicePortView) {
	cfg := testConfig(c.family)
	if c.config != nil {
		c.config(cfg)
	}
	var views []*model.ServicePortView
	if c.views != nil {
		views = c.views()
	}
	return cfg, views
}

func localhostNodePortViews(family knftables.Family) []*model.ServicePortView {
	clusterIP := func(i string) string { return "172.30.0.4" + i }
	epIP := func(i string) string { return "10.180.0." + i }
	if family == knftables.IPv6Family {
		clusterIP = func(i string) string { return "fd30::4" + i }
		epIP = func(i string) string { return "fd10::" + i }
	}
	tcp := svcPort("ns1", "web", "http", v1.ProtocolTCP, clusterIP("1"), 80)
	tcp.NodePort = 3001
	udp := svcPort("ns1", "dns", "dns", v1.ProtocolUDP, clusterIP("2"), 53)
	udp.NodePort = 3053
	sctp := svcPort("ns1", "sig", "sig", v1.ProtocolSCTP, clusterIP("3"), 7777)
	sctp.NodePort = 3077
	return []*model.ServicePortView{
		view(tcp, ep(epIP("1"), 8080, false)),
		view(udp),
		view(sctp, ep(epIP("3"), 7777, true)),
		view(svcPort("ns1", "internal", "http", v1.ProtocolTCP, clusterIP("4"), 80), ep(epIP("4"), 8080, false)),
	}
}
