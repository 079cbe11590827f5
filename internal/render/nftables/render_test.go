package nftables

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/render/rendertest"
	"github.com/kproxy/kproxy/internal/trace/nfttrace"
)

var (
	addrs    = rendertest.Addrs
	prefixes = rendertest.Prefixes
)

type renderCase struct {
	name   string
	family knftables.Family
	config func(*Config)
	views  func() []*model.ServicePortView
}

// renderCases are the expected-output cases, each also with Config.EndpointMaps
// (files "maps-<name>.nft").
func renderCases() []renderCase {
	cases := ruleRenderCases()
	for _, c := range ruleRenderCases() {
		mutate := c.config
		c.name = "maps/" + c.name
		c.config = func(cfg *Config) {
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
			config: func(c *Config) { c.NodePortAddresses = model.NodePortAddresses{All: true} },
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
			config: func(c *Config) { c.EndpointRulesMax = 2 },
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
			config: func(c *Config) { c.MasqueradeAll = true },
			views: func() []*model.ServicePortView {
				return []*model.ServicePortView{view(svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80), ep("10.180.0.1", 80, false))}
			}},
		{name: "detector none", family: v4, config: func(c *Config) { c.LocalDetector = model.LocalDetector{} }},
		{name: "detector node cidr", family: v4, config: func(c *Config) {
			c.LocalDetector = model.LocalDetector{Mode: model.DetectNodeCIDR, CIDRs: prefixes("10.0.1.0/24")}
		}},
		{name: "detector bridge", family: v4, config: func(c *Config) {
			c.LocalDetector = model.LocalDetector{Mode: model.DetectBridgeInterface, BridgeInterface: "cbr0"}
		}},
		{name: "detector interface prefix", family: v4, config: func(c *Config) {
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
			config: func(c *Config) { c.LocalhostNodePorts = LocalhostNodePorts{Enabled: true} },
			views:  func() []*model.ServicePortView { return localhostNodePortViews(v4) }},
		{name: "localhost nodeports proxied", family: v4,
			config: func(c *Config) { c.LocalhostNodePorts = LocalhostNodePorts{Enabled: true, Proxied: true} },
			views:  func() []*model.ServicePortView { return localhostNodePortViews(v4) }},
		{name: "localhost nodeports ipv6", family: v6,
			config: func(c *Config) { c.LocalhostNodePorts = LocalhostNodePorts{Enabled: true, Proxied: true} },
			views:  func() []*model.ServicePortView { return localhostNodePortViews(v6) }},
	}
}

func (c *renderCase) build() (*Config, []*model.ServicePortView) {
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

func TestRenderGolden(t *testing.T) {
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			cfg, views := tc.build()
			if err := cfg.Validate(); err != nil {
				t.Fatalf("invalid test config: %v", err)
			}
			fake, _ := programFull(t, cfg, views...)
			tracer, err := nfttrace.New(fake, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := tracer.Validate(); err != nil {
				t.Errorf("tracer cannot parse the ruleset: %v", err)
			}
			checkGolden(t, goldenName(tc.name), fake.Dump())
		})
	}
}

func TestRenderIsDeterministic(t *testing.T) {
	for _, tc := range renderCases() {
		cfg, views := tc.build()
		for _, v := range views {
			a, b := RenderService(cfg, v), RenderService(cfg, v)
			if !a.Equal(&b) {
				t.Errorf("%s: rendering %s twice differs", tc.name, v.Name)
			}
		}
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.Family = "inet" },
		func(c *Config) { c.MasqueradeBit = 32 },
		func(c *Config) { c.LocalDetector = model.LocalDetector{Mode: model.DetectClusterCIDR} },
		func(c *Config) {
			c.LocalDetector = model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: prefixes("fd00::/64")}
		},
		func(c *Config) {
			c.LocalDetector = model.LocalDetector{Mode: model.DetectBridgeInterface, BridgeInterface: "a b"}
		},
		func(c *Config) { c.LocalDetector = model.LocalDetector{Mode: "Nope"} },
		func(c *Config) { c.ServiceCIDRs = prefixes("fd00::/64") },
		func(c *Config) { c.LocalhostNodePorts = LocalhostNodePorts{Proxied: true} },
	}
	for i, mutate := range bad {
		cfg := testConfig(knftables.IPv4Family)
		mutate(cfg)
		if cfg.Validate() == nil {
			t.Errorf("case %d: expected an error", i)
		}
	}
}
