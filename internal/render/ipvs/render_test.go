package ipvs

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/model"
)

type renderCase struct {
	name   string
	family v1.IPFamily
	config func(*Config)
	views  func() []*model.ServicePortView
}

// renderCases are the expected-output cases; where upstream's proxier_test.go has
// the same case, its name is given and the golden file agrees with its
// expectations (virtual servers, real servers, set entries, rule order).
func renderCases() []renderCase {
	v4, v6 := v1.IPv4Protocol, v1.IPv6Protocol
	return []renderCase{
		// The rules without Services (TestCreateAndLinkKubeChain's chains;
		// TestDismissLocalhostRuleExist: the loopback RETURN first in KUBE-SERVICES).
		{name: "empty ipv4", family: v4},
		{name: "empty ipv6", family: v6},

		// TestIPv4Proxier, TestAcceptIPVSTraffic: ClusterIP of each protocol,
		// one local endpoint (KUBE-LOOP-BACK); TestMultiPortServiceBindAddr: the
		// ClusterIP of three ports is bound once.
		{name: "clusterip protocols", family: v4, views: views(
			view(svcPort("ns1", "svc1", "tcp", v1.ProtocolTCP, "10.20.30.41", 80), ep("10.180.0.1", 8080, false), ep("10.180.0.10", 8080, false)),
			view(svcPort("ns1", "svc1", "udp", v1.ProtocolUDP, "10.20.30.41", 53), ep("10.180.0.1", 5353, false), ep("10.180.0.2", 5353, true)),
			view(svcPort("ns1", "svc1", "sctp", v1.ProtocolSCTP, "10.20.30.41", 7777), ep("10.180.0.3", 7777, false)),
		)},
		// TestIPv6Proxier.
		{name: "clusterip ipv6", family: v6, views: views(
			view(svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "1002:ab8::2:1", 80), ep("1009:ab8::5:6", 8080, false), ep("fd10::5", 8080, true)),
		)},

		// TestNodePortIPv4 "1 service with node port, has 2 endpoints" (the IPv6
		// endpoint is ignored by the IPv4 renderer).
		{name: "nodeport node ips", family: v4, views: views(
			view(nodePortService(), ep("10.180.0.1", 80, false), ep("1002:ab8::2:10", 80, false)),
		)},
		// TestNodePortIPv4 "1 UDP service with node port, has endpoints"
		// (nodePortAddresses 0.0.0.0/0: every host address but kube-ipvs0's).
		{name: "nodeport all addresses", family: v4,
			config: func(c *Config) {
				c.NodePortAddresses = model.NodePortAddresses{All: true}
				c.HostAddresses = append(c.HostAddresses, addrs("127.0.0.1")...)
			},
			views: func() []*model.ServicePortView {
				sp := nodePortService()
				sp.Protocol, sp.Name.Protocol = v1.ProtocolUDP, v1.ProtocolUDP
				return []*model.ServicePortView{view(sp, ep("10.180.0.1", 80, false))}
			}},
		// TestNodePortIPv4 "1 SCTP service with node port, has endpoints": one
		// hash:ip,port entry per node address.
		{name: "nodeport sctp", family: v4,
			config: func(c *Config) { c.NodePortAddresses.IPs = addrs("100.101.102.103", "100.101.102.104") },
			views: func() []*model.ServicePortView {
				sp := nodePortService()
				sp.Protocol, sp.Name.Protocol = v1.ProtocolSCTP, v1.ProtocolSCTP
				return []*model.ServicePortView{view(sp, ep("10.180.0.1", 80, false))}
			}},
		// TestNodePortIPv6.
		{name: "nodeport ipv6", family: v6, views: func() []*model.ServicePortView {
			sp := svcPort("ns1", "svc1", "p80", v1.ProtocolUDP, "2020::1", 80)
			sp.NodePort = 3001
			return []*model.ServicePortView{view(sp, ep("1002:ab8::2:10", 80, false))}
		}},
		// No node address: neither NodePort nor health check node port, as upstream.
		{name: "nodeport without node addresses", family: v4,
			config: func(c *Config) { c.NodePortAddresses.IPs = addrs("127.0.0.1") },
			views: func() []*model.ServicePortView {
				sp := nodePortService()
				sp.ExternalPolicyLocal = true
				sp.LoadBalancerVIPs = addrs("1.2.3.4")
				sp.HealthCheckNodePort = 30000
				return []*model.ServicePortView{view(sp, ep("10.180.0.1", 80, true))}
			}},

		// TestLoadBalancer.
		{name: "loadbalancer", family: v4, views: func() []*model.ServicePortView {
			sp := nodePortService()
			sp.LoadBalancerVIPs = addrs("1.2.3.4")
			return []*model.ServicePortView{view(sp, ep("10.180.0.1", 80, false))}
		}},
		// TestLoadBalancerSourceRanges: the node IP is outside the range, so the
		// node may not reach the VIP (KUBE-IPVS-OUT-FILTER).
		{name: "loadbalancer source ranges", family: v4, views: func() []*model.ServicePortView {
			sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "10.20.30.41", 80)
			sp.LoadBalancerVIPs = addrs("1.2.3.4")
			sp.LoadBalancerSourceRanges = prefixes("10.0.0.0/8")
			return []*model.ServicePortView{view(sp, ep("10.180.0.1", 80, false))}
		}},
		// A range holding the node IP lets the VIP itself as source; a /32 range
		// is written as ipset prints it.
		{name: "loadbalancer source ranges with node", family: v4, views: func() []*model.ServicePortView {
			sp := nodePortService()
			sp.LoadBalancerVIPs = addrs("1.2.3.4", "5.6.7.8")
			sp.LoadBalancerSourceRanges = prefixes("100.101.102.0/24", "203.0.113.7/32")
			return []*model.ServicePortView{view(sp, ep("10.180.0.1", 80, false))}
		}},
		{name: "loadbalancer source ranges ipv6", family: v6, views: func() []*model.ServicePortView {
			sp := svcPort("ns1", "svc1", "p80", v1.ProtocolUDP, "2020::1", 53)
			sp.LoadBalancerVIPs = addrs("2001:db8:1::4")
			sp.LoadBalancerSourceRanges = prefixes("2001:db8:2::/64", "2001:db8:3::1/128")
			return []*model.ServicePortView{view(sp, ep("1002:ab8::2:10", 53, false))}
		}},

		// TestExternalIPs: 192.168.99.22 is already local on the node, so it is not
		// bound to kube-ipvs0.
		{name: "external ips", family: v4, views: func() []*model.ServicePortView {
			sp := svcPort("ns1", "svc1", "p80", v1.ProtocolUDP, "10.20.30.41", 80)
			sp.ExternalIPs = addrs("50.60.70.81", "192.168.99.22")
			return []*model.ServicePortView{view(sp, ep("10.180.0.1", 80, false))}
		}},
		// TestExternalIPsNoEndpoint.
		{name: "external ips no endpoints", family: v4, views: func() []*model.ServicePortView {
			sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "10.20.30.41", 80)
			sp.ExternalIPs = addrs("50.60.70.81")
			return []*model.ServicePortView{view(sp)}
		}},
		// Two Services on one externalIP and port: one virtual server, the
		// smaller name's.
		{name: "shared external ip", family: v4, views: func() []*model.ServicePortView {
			a := svcPort("ns1", "a", "p80", v1.ProtocolTCP, "10.20.30.41", 80)
			a.ExternalIPs = addrs("50.60.70.81")
			b := svcPort("ns1", "b", "p80", v1.ProtocolTCP, "10.20.30.42", 80)
			b.ExternalIPs = addrs("50.60.70.81")
			return []*model.ServicePortView{view(b, ep("10.180.0.2", 80, false)), view(a, ep("10.180.0.1", 80, false))}
		}},

		// TestOnlyLocalNodePorts, TestOnlyLocalLoadBalancing, TestOnlyLocalExternalIPs,
		// TestHealthCheckNodePort: external virtual servers get the local endpoint
		// only, the ClusterIP every endpoint.
		{name: "external traffic policy local", family: v4, views: func() []*model.ServicePortView {
			sp := nodePortService()
			sp.ExternalPolicyLocal = true
			sp.ExternalIPs = addrs("50.60.70.81")
			sp.LoadBalancerVIPs = addrs("1.2.3.4")
			sp.HealthCheckNodePort = 30000
			return []*model.ServicePortView{view(sp, ep("10.180.0.1", 80, true), ep("10.180.1.1", 80, false))}
		}},
		// Without local endpoints, upstream's ipvs mode falls back to every
		// endpoint (kubernetes#97081), where the other modes drop.
		{name: "external traffic policy local without local endpoints", family: v4, views: func() []*model.ServicePortView {
			sp := nodePortService()
			sp.ExternalPolicyLocal = true
			sp.LoadBalancerVIPs = addrs("1.2.3.4")
			sp.HealthCheckNodePort = 30000
			return []*model.ServicePortView{view(sp, ep("10.180.1.1", 80, false), ep("10.180.1.2", 80, false))}
		}},
		// TestTestInternalTrafficPolicyE2E: with local endpoints, the local one
		// only; without, no real server.
		{name: "internal traffic policy local", family: v4, views: func() []*model.ServicePortView {
			with := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "10.20.30.41", 80)
			with.InternalPolicyLocal = true
			without := svcPort("ns1", "svc2", "p80", v1.ProtocolTCP, "10.20.30.42", 80)
			without.InternalPolicyLocal = true
			return []*model.ServicePortView{
				view(with, ep("10.0.1.1", 80, true), ep("10.0.1.2", 80, false), ep("10.0.1.3", 80, false)),
				view(without, ep("10.0.1.4", 80, false)),
			}
		}},
		// internalTrafficPolicy Local on a NodePort Service without local endpoints:
		// upstream's fallback gives the ClusterIP every endpoint too.
		{name: "internal traffic policy local nodeport", family: v4, views: func() []*model.ServicePortView {
			sp := nodePortService()
			sp.InternalPolicyLocal = true
			return []*model.ServicePortView{view(sp, ep("10.0.1.2", 80, false), ep("10.0.1.3", 80, false))}
		}},

		// TestSessionAffinity.
		{name: "session affinity", family: v4, views: func() []*model.ServicePortView {
			sp := nodePortService()
			sp.ExternalIPs = addrs("50.60.70.81")
			sp.StickyMaxAgeSeconds = 10800
			return []*model.ServicePortView{view(sp, ep("10.180.0.1", 80, false), ep("10.180.0.2", 80, false))}
		}},
		// TestNodePortIPv4 "service has node port but no endpoints".
		{name: "no endpoints", family: v4, views: func() []*model.ServicePortView {
			sp := nodePortService()
			sp.LoadBalancerVIPs = addrs("1.2.3.4")
			return []*model.ServicePortView{view(sp)}
		}},
		// Test_EndpointSliceOnlyReadyAndTerminatingCluster and ...Local: the
		// serving terminating endpoints are used when none is ready.
		{name: "only terminating endpoints", family: v4, views: func() []*model.ServicePortView {
			cluster := nodePortService()
			local := svcPort("ns1", "svc2", "p80", v1.ProtocolTCP, "10.20.30.42", 80)
			local.NodePort = 3002
			local.ExternalPolicyLocal = true
			local.HealthCheckNodePort = 30000
			eps := func() []*model.Endpoint {
				return []*model.Endpoint{
					terminating(ep("10.0.1.1", 80, true)), terminating(ep("10.0.1.2", 80, true)),
					terminating(ep("10.0.1.3", 80, false)),
				}
			}
			return []*model.ServicePortView{view(cluster, eps()...), view(local, eps()...)}
		}},
		// Test_EndpointSliceOnlyReadyAndTerminatingLocal, exactly: the ClusterIP
		// gets the ready remote endpoint, the externalIP (externalTrafficPolicy
		// Local) the local serving terminating ones. Upstream's KUBE-LOOP-BACK also
		// holds 10.0.1.3 (local, neither ready nor serving); the view has only the
		// endpoints traffic may reach, so it holds two (see doc.go).
		{name: "only terminating local endpoints", family: v4, views: func() []*model.ServicePortView {
			sp := svcPort("ns1", "svc1", "", v1.ProtocolTCP, "172.20.1.1", 80)
			sp.ExternalIPs = addrs("1.2.3.4")
			sp.ExternalPolicyLocal = true
			notServing := terminating(ep("10.0.1.3", 80, true))
			notServing.Serving = false
			return []*model.ServicePortView{view(sp, terminating(ep("10.0.1.1", 80, true)), terminating(ep("10.0.1.2", 80, true)),
				notServing, terminating(ep("10.0.1.4", 80, false)), ep("10.0.1.5", 80, false))}
		}},
		// Test_EndpointSliceReadyAndTerminatingCluster: ready endpoints only.
		{name: "ready and terminating endpoints", family: v4, views: views(
			view(svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "10.20.30.41", 80),
				ep("10.0.1.1", 80, true), terminating(ep("10.0.1.2", 80, true)), ep("10.0.1.3", 80, false)),
		)},
		// Zone hints: this node (zone-a) keeps the endpoints hinted for its zone.
		{name: "topology hints", family: v4, views: func() []*model.ServicePortView {
			hinted := func(e *model.Endpoint, zone string) *model.Endpoint {
				e.Hints = &model.EndpointHints{Zones: []string{zone}}
				return e
			}
			sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "10.20.30.41", 80)
			eps := []*model.Endpoint{hinted(ep("10.180.0.1", 80, false), "zone-a"), hinted(ep("10.180.0.2", 80, false), "zone-b"),
				hinted(ep("10.180.0.3", 80, true), "zone-a")}
			return []*model.ServicePortView{model.CategorizeEndpoints(eps, sp, "node-a", "zone-a")}
		}},

		{name: "masquerade all", family: v4, config: func(c *Config) { c.MasqueradeAll = true },
			views: views(view(svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "10.20.30.41", 80), ep("10.180.0.1", 80, false)))},
		// Without a detector, node-originated traffic with a VIP source is
		// masqueraded (src,dst).
		{name: "detector none", family: v4, config: func(c *Config) { c.LocalDetector = model.LocalDetector{} },
			views: views(view(svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "10.20.30.41", 80), ep("10.180.0.1", 80, false)))},
		{name: "detector interface prefix", family: v6, config: func(c *Config) {
			c.LocalDetector = model.LocalDetector{Mode: model.DetectInterfaceNamePrefix, InterfaceNamePrefix: "veth"}
			c.MasqueradeBit = 15
		}, views: views(view(svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "2020::1", 80), ep("1002:ab8::2:10", 80, false)))},

		// Schedulers: upstream sets FlagSourceHash (0x10) with mh.
		{name: "scheduler mh", family: v4, config: func(c *Config) { c.Scheduler = "mh" }, views: func() []*model.ServicePortView {
			sp := nodePortService()
			sp.StickyMaxAgeSeconds = 60
			return []*model.ServicePortView{view(sp, ep("10.180.0.1", 80, false), ep("10.180.0.2", 80, false))}
		}},
		{name: "scheduler sh", family: v4, config: func(c *Config) { c.Scheduler = "sh" },
			views: views(view(svcPort("ns1", "svc1", "p80", v1.ProtocolUDP, "10.20.30.41", 80), ep("10.180.0.1", 80, false)))},
		{name: "scheduler lc", family: v6, config: func(c *Config) { c.Scheduler = "lc" },
			views: views(view(svcPort("ns1", "svc1", "p80", v1.ProtocolSCTP, "2020::1", 80), ep("1002:ab8::2:10", 80, false)))},
	}
}

// build returns the case's valid configuration and its views.
func (tc *renderCase) build(t testing.TB) (*Config, []*model.ServicePortView) {
	t.Helper()
	cfg := testConfig(tc.family)
	if tc.config != nil {
		tc.config(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("invalid test config: %v", err)
	}
	var vs []*model.ServicePortView
	if tc.views != nil {
		vs = tc.views()
	}
	return cfg, vs
}

func TestRender(t *testing.T) {
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			cfg, vs := tc.build(t)
			d := Render(cfg, vs)
			checkGolden(t, goldenName(tc.name), d.Dump())
		})
	}
}
