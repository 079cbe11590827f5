package iptables

import (
	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/model"
)

// masqueradeServices are upstream's TestInternalExternalMasquerade Services: an LB
// Service, the same with eTP Local, and with iTP Local, each with a local and a
// remote endpoint.
func masqueradeServices() []*model.ServicePortView {
	mk := func(n int, clusterIP, lb string, nodePort int32) *model.ServicePort {
		sp := svcPort("ns"+string(rune('0'+n)), "svc"+string(rune('0'+n)), "p80", v1.ProtocolTCP, clusterIP, 80)
		sp.NodePort = nodePort
		sp.LoadBalancerVIPs = addrs(lb)
		return sp
	}
	svc1 := mk(1, "172.30.0.41", "1.2.3.4", 3001)
	svc2 := mk(2, "172.30.0.42", "5.6.7.8", 3002)
	svc2.ExternalPolicyLocal = true
	svc2.HealthCheckNodePort = 30002
	svc3 := mk(3, "172.30.0.43", "9.10.11.12", 3003)
	svc3.InternalPolicyLocal = true
	return []*model.ServicePortView{
		view(svc1, ep("10.180.0.1", 80, true), ep("10.180.1.1", 80, false)),
		view(svc2, ep("10.180.0.2", 80, true), ep("10.180.1.2", 80, false)),
		view(svc3, ep("10.180.0.3", 80, true), ep("10.180.1.3", 80, false)),
	}
}

// masqueradeScenarios are upstream's TestInternalExternalMasquerade: which traffic
// is masqueraded, from pods, the node and outside, with and without a local-traffic
// detector and masqueradeAll.
func masqueradeScenarios() []flowScenario {
	all1, all2, all3 := "10.180.0.1:80, 10.180.1.1:80", "10.180.0.2:80, 10.180.1.2:80", "10.180.0.3:80, 10.180.1.3:80"
	flows := []flowTest{
		{name: "pod to ClusterIP", source: testPodIP, dest: "172.30.0.41", port: 80, output: all1},
		{name: "pod to NodePort", source: testPodIP, dest: testNodeIP, port: 3001, output: all1, masq: true},
		{name: "pod to LB", source: testPodIP, dest: "1.2.3.4", port: 80, output: all1, masq: true},
		{name: "node to ClusterIP", source: testNodeIP, local: true, dest: "172.30.0.41", port: 80, output: all1, masq: true},
		{name: "node to NodePort", source: testNodeIP, local: true, dest: testNodeIP, port: 3001, output: all1, masq: true},
		{name: "node to LB", source: testNodeIP, local: true, dest: "1.2.3.4", port: 80, output: all1, masq: true},
		{name: "external to ClusterIP", source: testExternalClient, dest: "172.30.0.41", port: 80, output: all1, masq: true},
		{name: "external to NodePort", source: testExternalClient, dest: testNodeIP, port: 3001, output: all1, masq: true},
		{name: "external to LB", source: testExternalClient, dest: "1.2.3.4", port: 80, output: all1, masq: true},

		{name: "pod to ClusterIP with eTP:Local", source: testPodIP, dest: "172.30.0.42", port: 80, output: all2},
		{name: "pod to NodePort with eTP:Local", source: testPodIP, dest: testNodeIP, port: 3002, output: all2},
		{name: "pod to LB with eTP:Local", source: testPodIP, dest: "5.6.7.8", port: 80, output: all2},
		{name: "node to ClusterIP with eTP:Local", source: testNodeIP, local: true, dest: "172.30.0.42", port: 80, output: all2, masq: true},
		{name: "node to NodePort with eTP:Local", source: testNodeIP, local: true, dest: testNodeIP, port: 3002, output: all2, masq: true},
		{name: "node to LB with eTP:Local", source: testNodeIP, local: true, dest: "5.6.7.8", port: 80, output: all2, masq: true},
		{name: "external to ClusterIP with eTP:Local", source: testExternalClient, dest: "172.30.0.42", port: 80, output: all2, masq: true},
		{name: "external to NodePort with eTP:Local", source: testExternalClient, dest: testNodeIP, port: 3002, output: "10.180.0.2:80"},
		{name: "external to LB with eTP:Local", source: testExternalClient, dest: "5.6.7.8", port: 80, output: "10.180.0.2:80"},

		{name: "pod to ClusterIP with iTP:Local", source: testPodIP, dest: "172.30.0.43", port: 80, output: "10.180.0.3:80"},
		{name: "pod to NodePort with iTP:Local", source: testPodIP, dest: testNodeIP, port: 3003, output: all3, masq: true},
		{name: "pod to LB with iTP:Local", source: testPodIP, dest: "9.10.11.12", port: 80, output: all3, masq: true},
		{name: "node to ClusterIP with iTP:Local", source: testNodeIP, local: true, dest: "172.30.0.43", port: 80, output: "10.180.0.3:80", masq: true},
		{name: "node to NodePort with iTP:Local", source: testNodeIP, local: true, dest: testNodeIP, port: 3003, output: all3, masq: true},
		{name: "node to LB with iTP:Local", source: testNodeIP, local: true, dest: "9.10.11.12", port: 80, output: all3, masq: true},
		{name: "external to ClusterIP with iTP:Local", source: testExternalClient, dest: "172.30.0.43", port: 80, output: "10.180.0.3:80", masq: true},
		{name: "external to NodePort with iTP:Local", source: testExternalClient, dest: testNodeIP, port: 3003, output: all3, masq: true},
		{name: "external to LB with iTP:Local", source: testExternalClient, dest: "9.10.11.12", port: 80, output: all3, masq: true},
	}
	type override struct {
		output string
		masq   *bool
	}
	no, yes := false, true
	variants := []struct {
		name          string
		masqueradeAll bool
		noDetector    bool
		overrides     map[string]override
	}{
		{name: "base"},
		{name: "no LocalTrafficDetector", noDetector: true, overrides: map[string]override{
			// Without a detector all traffic to a ClusterIP is taken for pod traffic.
			"node to ClusterIP":                    {masq: &no},
			"node to ClusterIP with eTP:Local":     {masq: &no},
			"node to ClusterIP with iTP:Local":     {masq: &no},
			"external to ClusterIP":                {masq: &no},
			"external to ClusterIP with eTP:Local": {masq: &no},
			"external to ClusterIP with iTP:Local": {masq: &no},
			// And pods get no eTP:Local short-circuit: only the local endpoints.
			"pod to NodePort with eTP:Local": {output: "10.180.0.2:80"},
			"pod to LB with eTP:Local":       {output: "10.180.0.2:80"},
		}},
		{name: "masqueradeAll", masqueradeAll: true, overrides: map[string]override{
			"pod to ClusterIP":                {masq: &yes},
			"pod to ClusterIP with eTP:Local": {masq: &yes},
			"pod to ClusterIP with iTP:Local": {masq: &yes},
		}},
		{name: "masqueradeAll, no LocalTrafficDetector", masqueradeAll: true, noDetector: true, overrides: map[string]override{
			"pod to ClusterIP":                {masq: &yes},
			"pod to ClusterIP with eTP:Local": {masq: &yes},
			"pod to ClusterIP with iTP:Local": {masq: &yes},
			"pod to NodePort with eTP:Local":  {output: "10.180.0.2:80"},
			"pod to LB with eTP:Local":        {output: "10.180.0.2:80"},
		}},
	}
	var out []flowScenario
	for _, v := range variants {
		cfg := testConfig(v1.IPv4Protocol)
		cfg.MasqueradeAll = v.masqueradeAll
		if v.noDetector {
			cfg.LocalDetector = model.LocalDetector{}
		}
		tests := make([]flowTest, len(flows))
		applied := 0
		for i, f := range flows {
			if o, ok := v.overrides[f.name]; ok {
				applied++
				if o.output != "" {
					f.output = o.output
				}
				if o.masq != nil {
					f.masq = *o.masq
				}
			}
			tests[i] = f
		}
		if applied != len(v.overrides) {
			panic("masqueradeScenarios: an override matches no flow")
		}
		out = append(out, flowScenario{name: "masquerade/" + v.name, cfg: cfg, views: masqueradeServices(), flows: tests})
	}
	return out
}

// noEndpointsAndFirewallScenario: Services without (local) endpoints are rejected
// or dropped, source ranges apply to LB IPs only, conntrack-INVALID packets are
// dropped, health check node ports are accepted. Unlike the nftables mode, traffic
// to unallocated ClusterIPs or to ports a Service does not have is left alone.
func noEndpointsAndFirewallScenario() flowScenario {
	noEps := svcPort("ns1", "noeps", "p80", v1.ProtocolTCP, "172.30.0.41", 80)
	noEps.NodePort = 3001
	noEps.ExternalIPs = addrs("192.168.99.11")
	noEps.LoadBalancerVIPs = addrs("1.2.3.4")

	fw := svcPort("ns2", "fw", "p80", v1.ProtocolTCP, "172.30.0.42", 80)
	fw.NodePort = 3002
	fw.LoadBalancerVIPs = addrs("5.6.7.8")
	fw.LoadBalancerSourceRanges = prefixes("203.0.113.0/25")

	noLocal := svcPort("ns3", "nolocal", "p80", v1.ProtocolTCP, "172.30.0.43", 80)
	noLocal.NodePort = 3003
	noLocal.ExternalPolicyLocal = true
	noLocal.HealthCheckNodePort = 30003
	noLocal.LoadBalancerVIPs = addrs("9.10.11.12")
	noLocal.ExternalIPs = addrs("192.168.99.13")

	itpNoLocal := svcPort("ns4", "itp", "p80", v1.ProtocolTCP, "172.30.0.44", 80)
	itpNoLocal.InternalPolicyLocal = true

	udp := svcPort("ns5", "dns", "dns", v1.ProtocolUDP, "172.30.0.45", 53)

	return flowScenario{
		name: "no endpoints and firewall",
		cfg:  testConfig(v1.IPv4Protocol),
		views: []*model.ServicePortView{
			view(noEps),
			view(fw, ep("10.180.0.2", 80, false)),
			view(noLocal, ep("10.180.1.3", 80, false)),
			view(itpNoLocal, ep("10.180.1.4", 80, false)),
			view(udp, ep("10.180.0.5", 5353, false)),
		},
		flows: []flowTest{
			{name: "no endpoints: pod to ClusterIP rejected", source: testPodIP, dest: "172.30.0.41", port: 80, output: "REJECT"},
			{name: "no endpoints: node to ClusterIP rejected", source: testNodeIP, local: true, dest: "172.30.0.41", port: 80, output: "REJECT"},
			{name: "no endpoints: NodePort rejected", source: testExternalClient, dest: testNodeIP, port: 3001, output: "REJECT"},
			{name: "no endpoints: pod to NodePort rejected", source: testPodIP, dest: testNodeIP, port: 3001, output: "REJECT"},
			{name: "no endpoints: externalIP rejected", source: testExternalClient, dest: "192.168.99.11", port: 80, output: "REJECT"},
			{name: "no endpoints: LB rejected", source: testExternalClient, dest: "1.2.3.4", port: 80, output: "REJECT"},
			{name: "no endpoints: pod to LB rejected", source: testPodIP, dest: "1.2.3.4", port: 80, output: "REJECT"},
			{name: "other port of a ClusterIP untouched", source: testPodIP, dest: "172.30.0.42", port: 81, output: "ACCEPT"},
			{name: "unallocated ClusterIP untouched", source: testPodIP, dest: "172.30.0.99", port: 80, output: "ACCEPT"},
			{name: "LB from allowed range", source: testExternalClient, dest: "5.6.7.8", port: 80, output: "10.180.0.2:80", masq: true},
			{name: "LB from blocked client dropped", source: testBlockedClient, dest: "5.6.7.8", port: 80, output: "DROP"},
			{name: "NodePort ignores source ranges", source: testBlockedClient, dest: testNodeIP, port: 3002, output: "10.180.0.2:80", masq: true},
			{name: "eTP Local without local endpoints: LB dropped", source: testExternalClient, dest: "9.10.11.12", port: 80, output: "DROP"},
			{name: "eTP Local without local endpoints: externalIP dropped", source: testExternalClient, dest: "192.168.99.13", port: 80, output: "DROP"},
			{name: "eTP Local without local endpoints: NodePort dropped", source: testExternalClient, dest: testNodeIP, port: 3003, output: "DROP"},
			{name: "eTP Local without local endpoints: pod short-circuited", source: testPodIP, dest: "9.10.11.12", port: 80, output: "10.180.1.3:80"},
			{name: "eTP Local without local endpoints: node short-circuited", source: testNodeIP, local: true, dest: "9.10.11.12", port: 80, output: "10.180.1.3:80", masq: true},
			{name: "eTP Local without local endpoints: ClusterIP works", source: testPodIP, dest: "172.30.0.43", port: 80, output: "10.180.1.3:80"},
			{name: "health check node port accepted", source: testExternalClient, dest: testNodeIP, port: 30003, output: "ACCEPT"},
			{name: "iTP Local without local endpoints: pod dropped", source: testPodIP, dest: "172.30.0.44", port: 80, output: "DROP"},
			{name: "iTP Local without local endpoints: node dropped", source: testNodeIP, local: true, dest: "172.30.0.44", port: 80, output: "DROP"},
			{name: "UDP port to targetPort", source: testPodIP, protocol: "udp", dest: "172.30.0.45", port: 53, output: "10.180.0.5:5353"},
			{name: "TCP to a UDP-only Service port untouched", source: testPodIP, protocol: "tcp", dest: "172.30.0.45", port: 53, output: "ACCEPT"},
			{name: "conntrack INVALID dropped", source: testPodIP, ctState: "invalid", dest: "10.180.0.2", port: 80, output: "DROP"},
			{name: "established connection not re-NATed", source: testPodIP, ctState: "established", dest: "172.30.0.41", port: 80, output: "ACCEPT"},
		},
	}
}

// loadBalancerScenario is upstream's TestLoadBalancer: two LB IPs with source
// ranges that hold the node's IP, so the node (and the LB IPs as sources) are
// allowed too.
func loadBalancerScenario() flowScenario {
	sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80)
	sp.NodePort = 3001
	sp.LoadBalancerVIPs = addrs("1.2.3.5", "1.2.3.6")
	sp.LoadBalancerSourceRanges = prefixes("192.168.0.0/24", "203.0.113.0/25")
	epOut := "10.180.0.1:80"
	return flowScenario{
		name:  "load balancer",
		cfg:   testConfig(v1.IPv4Protocol),
		views: []*model.ServicePortView{view(sp, ep("10.180.0.1", 80, false))},
		flows: []flowTest{
			{name: "pod to cluster IP", source: testPodIP, dest: "172.30.0.41", port: 80, output: epOut},
			{name: "external to nodePort", source: testExternalClient, dest: testNodeIP, port: 3001, output: epOut, masq: true},
			{name: "nodePort bypasses LoadBalancerSourceRanges", source: testBlockedClient, dest: testNodeIP, port: 3001, output: epOut, masq: true},
			{name: "accepted external to LB1", source: testExternalClient, dest: "1.2.3.5", port: 80, output: epOut, masq: true},
			{name: "accepted external to LB2", source: testExternalClient, dest: "1.2.3.6", port: 80, output: epOut, masq: true},
			{name: "blocked external to LB1", source: testBlockedClient, dest: "1.2.3.5", port: 80, output: "DROP"},
			{name: "blocked external to LB2", source: testBlockedClient, dest: "1.2.3.6", port: 80, output: "DROP"},
			{name: "pod to LB1 (blocked by LoadBalancerSourceRanges)", source: testPodIP, dest: "1.2.3.5", port: 80, output: "DROP"},
			{name: "pod to LB2 (blocked by LoadBalancerSourceRanges)", source: testPodIP, dest: "1.2.3.6", port: 80, output: "DROP"},
			{name: "node to LB1 (allowed by LoadBalancerSourceRanges)", source: testNodeIP, local: true, dest: "1.2.3.5", port: 80, output: epOut, masq: true},
			{name: "node to LB2 (allowed by LoadBalancerSourceRanges)", source: testNodeIP, local: true, dest: "1.2.3.6", port: 80, output: epOut, masq: true},
			{name: "same node to LB1, SNATted to LB1 (implicitly allowed)", source: "1.2.3.5", dest: "1.2.3.5", port: 80, output: epOut, masq: true},
			{name: "same node to LB2, SNATted to LB2 (implicitly allowed)", source: "1.2.3.6", dest: "1.2.3.6", port: 80, output: epOut, masq: true},
		},
	}
}

// nodePortAllAddressesScenario is upstream's TestNodePorts with nodePortAddresses
// unset: every local address but loopback serves NodePorts.
func nodePortAllAddressesScenario() flowScenario {
	cfg := testConfig(v1.IPv4Protocol)
	cfg.NodePortAddresses = model.NodePortAddresses{All: true}
	sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80)
	sp.NodePort = 3001
	return flowScenario{
		name:  "NodePort on all addresses",
		cfg:   cfg,
		views: []*model.ServicePortView{view(sp, ep("10.180.0.1", 80, false))},
		flows: []flowTest{
			{name: "primary node IP", source: testExternalClient, dest: testNodeIP, port: 3001, output: "10.180.0.1:80", masq: true},
			{name: "secondary node IP", source: testExternalClient, dest: testNodeIP2, port: 3001, output: "10.180.0.1:80", masq: true},
			{name: "not a node IP", source: testExternalClient, dest: "192.168.2.2", port: 3001, output: "ACCEPT"},
			{name: "node to its own NodePort", source: testNodeIP, local: true, dest: testNodeIP, port: 3001, output: "10.180.0.1:80", masq: true},
			{name: "localhost NodePorts are off", source: "127.0.0.1", local: true, dest: "127.0.0.1", port: 3001, output: "ACCEPT"},
		},
	}
}

// localhostNodePortsScenario is upstream's TestNodePorts with localhost NodePorts
// (IPv4, route_localnet): served on 127.0.0.1 and masqueraded; packets from
// elsewhere to 127.0.0.0/8 are martians, dropped by KUBE-FIREWALL.
func localhostNodePortsScenario() flowScenario {
	cfg := testConfig(v1.IPv4Protocol)
	cfg.LocalhostNodePorts = true
	sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80)
	sp.NodePort = 3001
	both := "10.180.0.1:80, 10.180.1.1:80"
	return flowScenario{
		name:  "localhost NodePorts",
		cfg:   cfg,
		views: []*model.ServicePortView{view(sp, ep("10.180.0.1", 80, true), ep("10.180.1.1", 80, false))},
		flows: []flowTest{
			{name: "localhost to NodePort gets masqueraded", source: "127.0.0.1", local: true, dest: "127.0.0.1", port: 3001, output: both, masq: true},
			{name: "external to nodePort", source: testExternalClient, dest: testNodeIP, port: 3001, output: both, masq: true},
			{name: "martian to localhost dropped", source: testExternalClient, dest: "127.0.0.1", port: 22, output: "DROP"},
			{name: "localhost to localhost untouched", source: "127.0.0.1", local: true, dest: "127.0.0.1", port: 22, output: "ACCEPT"},
		},
	}
}

// hairpinScenario: an endpoint reaching its own Service is masqueraded only on the
// path that picks itself (upstream's "hairpin to cluster IP").
func hairpinScenario() flowScenario {
	sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80)
	return flowScenario{
		name:  "hairpin",
		cfg:   testConfig(v1.IPv4Protocol),
		views: []*model.ServicePortView{view(sp, ep("10.180.0.1", 8080, true), ep("10.180.1.1", 8080, false))},
		flows: []flowTest{
			{name: "endpoint to its own Service", source: "10.180.0.1", dest: "172.30.0.41", port: 80,
				output: "10.180.0.1:8080, 10.180.1.1:8080", hairpin: "10.180.0.1:8080"},
		},
	}
}

// sessionAffinityScenario: ClientIP affinity spreads a new client and sends a client
// that an endpoint's recent list holds back to it.
func sessionAffinityScenario() flowScenario {
	sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80)
	sp.StickyMaxAgeSeconds = 10800
	sp.NodePort = 3001
	second := ep("10.180.1.1", 80, false)
	list := namesFor(&sp.Name).endpointChain(second)
	both := "10.180.0.1:80, 10.180.1.1:80"
	return flowScenario{
		name:  "session affinity",
		cfg:   testConfig(v1.IPv4Protocol),
		views: []*model.ServicePortView{view(sp, ep("10.180.0.1", 80, false), second)},
		flows: []flowTest{
			{name: "new client spread", source: testPodIP, dest: "172.30.0.41", port: 80, output: both},
			{name: "known client sticks", source: testPodIP, dest: "172.30.0.41", port: 80, output: "10.180.1.1:80",
				recent: map[string][]string{list: {testPodIP}}},
			{name: "other client spread", source: "10.0.0.3", dest: "172.30.0.41", port: 80, output: both,
				recent: map[string][]string{list: {testPodIP}}},
			{name: "known external client sticks through the NodePort", source: testExternalClient, dest: testNodeIP, port: 3001,
				output: "10.180.1.1:80", masq: true, recent: map[string][]string{list: {testExternalClient}}},
		},
	}
}

// ipv6Scenario: ClusterIP, NodePort and LB with source ranges in IPv6.
func ipv6Scenario() flowScenario {
	sp := svcPort("ns1", "svc1", "p80", v1.ProtocolTCP, "fd30::41", 80)
	sp.NodePort = 3001
	sp.LoadBalancerVIPs = addrs("2001:db8::1")
	sp.LoadBalancerSourceRanges = prefixes("2001:db8:1::/64")
	noEps := svcPort("ns2", "noeps", "p80", v1.ProtocolTCP, "fd30::42", 80)
	both := "[fd10::1]:8080, [fd10::2]:8080"
	return flowScenario{
		name:  "IPv6",
		cfg:   testConfig(v1.IPv6Protocol),
		views: []*model.ServicePortView{view(sp, ep("fd10::1", 8080, true), ep("fd10::2", 8080, false)), view(noEps)},
		flows: []flowTest{
			{name: "pod to ClusterIP", source: "fd10::5", dest: "fd30::41", port: 80, output: both},
			{name: "external to ClusterIP", source: "2001:db8:2::5", dest: "fd30::41", port: 80, output: both, masq: true},
			{name: "node to ClusterIP", source: "fd00::2", local: true, dest: "fd30::41", port: 80, output: both, masq: true},
			{name: "LB from allowed range", source: "2001:db8:1::5", dest: "2001:db8::1", port: 80, output: both, masq: true},
			{name: "LB from blocked client dropped", source: "2001:db8:2::5", dest: "2001:db8::1", port: 80, output: "DROP"},
			{name: "NodePort", source: "2001:db8:2::5", dest: "fd00::2", port: 3001, output: both, masq: true},
			{name: "no endpoints rejected", source: "fd10::5", dest: "fd30::42", port: 80, output: "REJECT"},
			{name: "unallocated ClusterIP untouched", source: "fd10::5", dest: "fd30::99", port: 80, output: "ACCEPT"},
		},
	}
}
