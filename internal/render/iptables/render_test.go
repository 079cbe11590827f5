package iptables

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/model"
)

type renderCase struct {
	name   string
	family v1.IPFamily
	config func(*Config)
	views  func() []*model.ServicePortView
}

func nodePortService() *model.ServicePort {
	sp := svcPort("ns2", "svc2", "p80", v1.ProtocolTCP, "172.30.0.42", 80)
	sp.NodePort = 3001
	return sp
}

func renderCases() []renderCase {
	v4, v6 := v1.IPv4Protocol, v1.IPv6Protocol
	oneService := func() []*model.ServicePortView {
		return []*model.ServicePortView{view(svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80), ep("10.180.0.1", 80, false))}
	}
	withNodePort := func() []*model.ServicePortView {
		return []*model.ServicePortView{view(nodePortService(), ep("10.180.0.2", 80, false))}
	}
	return []renderCase{
		{name: "base ipv4", family: v4},
		{name: "base ipv6", family: v6},
		{name: "upstream overall", family: v4, views: upstreamOverallViews},
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
		{name: "many endpoints", family: v4, views: func() []*model.ServicePortView {
			var eps []*model.Endpoint
			for _, ip := range []string{"10.180.0.1", "10.180.0.2", "10.180.0.3", "10.180.0.4", "10.180.0.5", "10.180.0.10", "10.180.0.11"} {
				eps = append(eps, ep(ip, 80, false))
			}
			return []*model.ServicePortView{view(svcPort("ns1", "svc1", "", v1.ProtocolTCP, "172.30.0.41", 80), eps...)}
		}},
		{name: "nodeport node ips", family: v4, views: withNodePort},
		{name: "nodeport all addresses", family: v4,
			config: func(c *Config) { c.NodePortAddresses = model.NodePortAddresses{All: true} }, views: withNodePort},
		{name: "localhost nodeports all addresses", family: v4,
			config: func(c *Config) {
				c.NodePortAddresses = model.NodePortAddresses{All: true}
				c.LocalhostNodePorts = true
			}, views: withNodePort},
		{name: "localhost nodeports node ips", family: v4,
			config: func(c *Config) { c.LocalhostNodePorts = true }, views: withNodePort},
		{name: "localhost nodeports ipv6 ignored", family: v6,
			config: func(c *Config) {
				c.NodePortAddresses = model.NodePortAddresses{IPs: addrs("fd00::2", "::1")}
				c.LocalhostNodePorts = true
			}},
		{name: "loadbalancer source ranges", family: v4, views: func() []*model.ServicePortView {
			sp := nodePortService()
			sp.LoadBalancerVIPs = addrs("1.2.3.4")
			// The second range holds the node IP: the VIP is allowed as a source.
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
			with := nodePortService()
			with.ExternalPolicyLocal = true
			with.LoadBalancerVIPs = addrs("1.2.3.4")
			with.HealthCheckNodePort = 30000
			without := svcPort("ns3", "svc3", "p80", v1.ProtocolTCP, "172.30.0.43", 80)
			without.NodePort = 3003
			without.ExternalPolicyLocal = true
			without.LoadBalancerVIPs = addrs("5.6.7.8")
			without.HealthCheckNodePort = 30001
			return []*model.ServicePortView{
				view(with, ep("10.180.0.1", 80, false), ep("10.180.0.2", 80, true)),
				view(without, ep("10.180.0.3", 80, false)),
			}
		}},
		{name: "no endpoints", family: v4, views: func() []*model.ServicePortView {
			sp := nodePortService()
			sp.ExternalIPs = addrs("192.168.99.22")
			sp.LoadBalancerVIPs = addrs("1.2.3.4")
			return []*model.ServicePortView{view(sp)}
		}},
		{name: "no endpoints ipv6", family: v6, views: func() []*model.ServicePortView {
			return []*model.ServicePortView{view(svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "fd30::41", 80))}
		}},
		{name: "only terminating endpoints", family: v4, views: func() []*model.ServicePortView {
			return []*model.ServicePortView{view(svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80),
				terminating(ep("10.180.0.1", 80, false)), terminating(ep("10.180.0.2", 80, true)))}
		}},
		{name: "topology hints", family: v4, views: func() []*model.ServicePortView {
			hinted := func(e *model.Endpoint, zone string) *model.Endpoint {
				e.Hints = &model.EndpointHints{Zones: []string{zone}}
				return e
			}
			sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80)
			eps := []*model.Endpoint{hinted(ep("10.180.0.1", 80, false), "zone-a"), hinted(ep("10.180.0.2", 80, false), "zone-b"),
				hinted(ep("10.180.0.3", 80, true), "zone-a")}
			// This node is in zone-a: the model keeps the endpoints hinted for it.
			return []*model.ServicePortView{model.CategorizeEndpoints(eps, sp, "node-a", "zone-a")}
		}},
		{name: "masquerade all", family: v4, config: func(c *Config) { c.MasqueradeAll = true }, views: oneService},
		{name: "detector none", family: v4, config: func(c *Config) { c.LocalDetector = model.LocalDetector{} }, views: func() []*model.ServicePortView {
			sp := nodePortService()
			sp.ExternalPolicyLocal = true
			return []*model.ServicePortView{view(sp, ep("10.180.0.2", 80, true))}
		}},
		{name: "detector node cidr", family: v4, config: func(c *Config) {
			c.LocalDetector = model.LocalDetector{Mode: model.DetectNodeCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.1.0/24")}}
		}, views: oneService},
		{name: "detector bridge", family: v4, config: func(c *Config) {
			c.LocalDetector = model.LocalDetector{Mode: model.DetectBridgeInterface, BridgeInterface: "cbr0"}
		}, views: func() []*model.ServicePortView {
			sp := nodePortService()
			sp.ExternalPolicyLocal = true
			return []*model.ServicePortView{view(sp, ep("10.180.0.2", 80, true))}
		}},
		{name: "detector interface prefix", family: v4, config: func(c *Config) {
			c.LocalDetector = model.LocalDetector{Mode: model.DetectInterfaceNamePrefix, InterfaceNamePrefix: "veth"}
		}, views: func() []*model.ServicePortView {
			sp := nodePortService()
			sp.ExternalPolicyLocal = true
			return []*model.ServicePortView{view(sp, ep("10.180.0.2", 80, true))}
		}},
		{name: "large cluster", family: v4, config: func(c *Config) { c.LargeCluster = true }, views: func() []*model.ServicePortView {
			sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80)
			sp.StickyMaxAgeSeconds = 10800
			return []*model.ServicePortView{view(sp, ep("10.180.0.1", 80, false), ep("10.180.0.2", 80, true))}
		}},
		{name: "tcp be liberal", family: v4, config: func(c *Config) { c.TCPBeLiberal = true }},
		{name: "nfacct counters", family: v4, config: func(c *Config) {
			c.NodePortAddresses = model.NodePortAddresses{All: true}
			c.LocalhostNodePorts = true
			c.CountInvalidDrops = true
			c.CountLocalhostNodePorts = true
		}, views: withNodePort},
		{name: "ipv6 services", family: v6, views: func() []*model.ServicePortView {
			sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "fd30::41", 80)
			sp.NodePort = 3001
			sp.LoadBalancerVIPs = addrs("2001:db8::1")
			sp.LoadBalancerSourceRanges = prefixes("2001:db8:1::/64")
			sp.ExternalIPs = addrs("2001:db8::2")
			aff := svcPort("ns1", "svc2", "p53", v1.ProtocolUDP, "fd30::42", 53)
			aff.StickyMaxAgeSeconds = 300
			return []*model.ServicePortView{
				view(sp, ep("fd10::1", 8080, true), ep("fd10::2", 8080, false)),
				view(aff, ep("fd10::3", 53, false)),
			}
		}},
		{name: "ipv6 external traffic policy local", family: v6, views: func() []*model.ServicePortView {
			sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "fd30::41", 80)
			sp.NodePort = 3001
			sp.LoadBalancerVIPs = addrs("2001:db8::1")
			sp.ExternalPolicyLocal = true
			sp.HealthCheckNodePort = 30000
			return []*model.ServicePortView{view(sp, ep("fd10::1", 8080, true), ep("fd10::2", 8080, false))}
		}},
	}
}

// upstreamOverallViews are the Services of upstream's TestOverallIPTablesRules.
func upstreamOverallViews() []*model.ServicePortView {
	svc2 := svcPort("ns2", "svc2", "p80", v1.ProtocolTCP, "172.30.0.42", 80)
	svc2.NodePort = 3001
	svc2.ExternalPolicyLocal = true
	svc2.LoadBalancerVIPs = addrs("1.2.3.4")
	svc2.ExternalIPs = addrs("192.168.99.22")
	svc2.HealthCheckNodePort = 30000
	svc3 := svcPort("ns3", "svc3", "p80", v1.ProtocolTCP, "172.30.0.43", 80)
	svc3.NodePort = 3003
	svc4 := svcPort("ns4", "svc4", "p80", v1.ProtocolTCP, "172.30.0.44", 80)
	svc4.ExternalIPs = addrs("192.168.99.33")
	svc5 := svcPort("ns5", "svc5", "p80", v1.ProtocolTCP, "172.30.0.45", 80)
	svc5.NodePort = 3002
	svc5.LoadBalancerVIPs = addrs("5.6.7.8")
	svc5.LoadBalancerSourceRanges = prefixes("203.0.113.0/25")
	svc5.StickyMaxAgeSeconds = 10800
	return []*model.ServicePortView{
		view(svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80), ep("10.180.0.1", 80, false)),
		view(svc2, ep("10.180.0.2", 80, false)),
		view(svc3, ep("10.180.0.3", 80, false)),
		view(svc4, ep("10.180.0.4", 80, false), ep("10.180.0.5", 80, true)),
		view(svc5, ep("10.180.0.3", 80, false)),
		view(svcPort("ns6", "svc6", "p80", v1.ProtocolTCP, "172.30.0.46", 80)),
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

// TestRenderGolden checks the full-sync restore input of each case, and that the
// Fake (which applies it as iptables-restore --noflush does) ends up holding exactly
// what the State says.
func TestRenderGolden(t *testing.T) {
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			cfg, views := tc.build()
			if err := cfg.Validate(); err != nil {
				t.Fatalf("invalid test config: %v", err)
			}
			input, st := fullInput(cfg, views...)
			checkGolden(t, goldenName(tc.name), input)
			fake, _ := programFull(t, cfg, views...)
			if diff := cmp.Diff(st.Dump(), fakeDump(fake)); diff != "" {
				t.Errorf("restored rules differ from the State (-state +restored):\n%s", diff)
			}
			for _, table := range tables {
				if got, want := st.Rules(table), strings.Count(st.DumpTable(table), "\n-A "); got != want {
					t.Errorf("State counts %d rules in %s, dump has %d", got, table, want)
				}
			}
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

// TestUpstreamChainNames checks names that upstream's own tests expect.
func TestUpstreamChainNames(t *testing.T) {
	views := upstreamOverallViews()
	names := func(i int) serviceNames { return namesFor(&views[i].Name) }
	for _, c := range []struct{ got, want string }{
		{names(0).clusterPolicy, "KUBE-SVC-XPGD46QRK7WJZT7O"},
		{names(0).endpointChain(views[0].ClusterEndpoints[0]), "KUBE-SEP-SXIVWICOYRO3J4NJ"},
		{names(1).external, "KUBE-EXT-GNZBNJ2PO5MGZ6GT"},
		{names(4).firewall, "KUBE-FW-NUKIZ6OKUXPJNT4C"},
		{names(4).endpointChain(views[4].ClusterEndpoints[0]), "KUBE-SEP-I77PXRDZVX7PMWMN"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
}

func TestProbability(t *testing.T) {
	for n, want := range map[int]string{2: "0.50000000000", 3: "0.33333333349", 4: "0.25000000000", 7: "0.14285714272", 1000: "0.00100000016", 100000: "0.00001000008"} {
		if got := probability(n); got != want {
			t.Errorf("probability(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestIsServiceChain(t *testing.T) {
	for name, want := range map[string]bool{"KUBE-SVC-X": true, "KUBE-SEP-X": true, "KUBE-EXT-X": true, "KUBE-FW-X": true,
		"KUBE-SVL-X": true, "KUBE-SERVICES": false, "KUBE-EXTERNAL-SERVICES": false, "KUBE-FORWARD": false, "KUBE-FIREWALL": false} {
		if IsServiceChain(name) != want {
			t.Errorf("IsServiceChain(%s) = %v", name, !want)
		}
	}
}

// TestJumpRules ensures every jump on the Fake, as the dataplane does: the target
// chains must exist first.
func TestJumpRules(t *testing.T) {
	cfg := testConfig(v1.IPv4Protocol)
	fake, _ := programFull(t, cfg)
	ctx := context.Background()
	for _, j := range JumpRules() {
		if _, err := fake.EnsureChain(ctx, iptablesTable(j.Table), iptablesChain(j.Target)); err != nil {
			t.Fatal(err)
		}
		if _, err := fake.EnsureRule(ctx, true, iptablesTable(j.Table), iptablesChain(j.Chain), j.Args...); err != nil {
			t.Fatalf("%v: %v", j, err)
		}
		if j.Args[len(j.Args)-1] != j.Target {
			t.Errorf("%v does not end with its target", j)
		}
	}
	checkGolden(t, "jump-rules.iptables", fake.Dump(iptables.TableFilter)+fake.Dump(iptables.TableNAT))
}

func TestConfigValidate(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.Family = "inet" },
		func(c *Config) { c.MasqueradeBit = 32 },
		func(c *Config) { c.LocalDetector = model.LocalDetector{Mode: model.DetectClusterCIDR} },
		func(c *Config) {
			c.LocalDetector = model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("fd00::/64")}}
		},
		func(c *Config) {
			c.LocalDetector = model.LocalDetector{Mode: model.DetectBridgeInterface, BridgeInterface: "a b"}
		},
		func(c *Config) { c.LocalDetector = model.LocalDetector{Mode: "Nope"} },
		func(c *Config) { c.NodePortAddresses.IPs = addrs("fd00::1") },
	}
	for i, mutate := range bad {
		cfg := testConfig(v1.IPv4Protocol)
		mutate(cfg)
		if cfg.Validate() == nil {
			t.Errorf("case %d: expected an error", i)
		}
	}
}
