package iptables

import (
	"net/netip"
	"strconv"

	"github.com/kproxy/kproxy/internal/model"
)

// RenderService renders one ServicePort as upstream kube-proxy v1.37's iptables
// mode does (pkg/proxy/iptables/proxier.go, syncProxyRules): its nat chains and
// its entries in the shared chains. Endpoints, addresses and source ranges of
// another family than cfg.Family are ignored. cfg must be valid.
func RenderService(cfg *Config, v *model.ServicePortView) Fragment {
	r := serviceRenderer{cfg: cfg, v: v, sp: v.ServicePort, names: namesFor(&v.ServicePort.Name)}
	r.render()
	sortChains(r.f.Chains)
	return r.f
}

// RenderServices renders every view (see RenderService), keyed by ServicePort name.
func RenderServices(cfg *Config, views []*model.ServicePortView) map[model.ServicePortName]*Fragment {
	out := make(map[model.ServicePortName]*Fragment, len(views))
	for _, v := range views {
		f := RenderService(cfg, v)
		out[v.Name] = &f
	}
	return out
}

type serviceRenderer struct {
	cfg   *Config
	v     *model.ServicePortView
	sp    *model.ServicePort
	names serviceNames
	f     Fragment
}

func (r *serviceRenderer) entry(table Table, chain string, rl *Rule) {
	r.f.Entries = append(r.f.Entries, Entry{Table: table, Chain: chain, Rule: rl.String()})
}

func (r *serviceRenderer) chain(name string, rules []*Rule) {
	c := Chain{Table: TableNAT, Name: name, Rules: make([]string, len(rules))}
	for i, rl := range rules {
		c.Rules[i] = rl.String()
	}
	r.f.Chains = append(r.f.Chains, c)
}

func (r *serviceRenderer) familyEndpoints(eps []*model.Endpoint) []*model.Endpoint {
	return model.EndpointsInFamily(eps, r.cfg.Family)
}

func (r *serviceRenderer) familyAddrs(in []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, 0, len(in))
	for _, ip := range in {
		if r.cfg.hasFamily(ip) {
			out = append(out, ip)
		}
	}
	return out
}

// portRule starts a rule matching proto and port to ip, with a comment, as upstream's
// "-m comment --comment C -m PROTO -p PROTO -d IP --dport PORT".
func (r *serviceRenderer) portRule(comment string, ip netip.Addr, port int32) *Rule {
	rl := NewRule().Comment(comment)
	if ip.IsValid() {
		rl.Dest(HostPrefix(ip), false)
	}
	return rl.DPort(r.names.protocol, port)
}

func (r *serviceRenderer) render() {
	cfg, sp, v, n := r.cfg, r.sp, r.v, &r.names
	if !sp.ClusterIP.IsValid() || !cfg.hasFamily(sp.ClusterIP) {
		return
	}
	clusterEps := r.familyEndpoints(v.ClusterEndpoints)
	localEps := r.familyEndpoints(v.LocalEndpoints)
	reachable := r.familyEndpoints(v.AllReachableEndpoints)
	hasEndpoints := v.HasAnyEndpoints
	externalIPs := r.familyAddrs(sp.ExternalIPs)
	lbVIPs := r.familyAddrs(sp.LoadBalancerVIPs)
	var sourceRanges []netip.Prefix
	for _, p := range sp.LoadBalancerSourceRanges {
		if cfg.hasFamily(p.Addr()) {
			sourceRanges = append(sourceRanges, p.Masked())
		}
	}

	// The decisions every mode shares (model.Routing); upstream's variables.
	rt := model.DecideRouting(sp, hasEndpoints, len(clusterEps), len(localEps))
	usesClusterChain, usesLocalChain, usesExternalChain := rt.ClusterSelection, rt.LocalSelection, rt.ExternalEntry
	internalChain, hasInternal := n.policy(rt.InternalLocal), rt.InternalServed
	externalPolicyChain, hasExternal := n.policy(rt.ExternalLocal), rt.ExternalServed
	// As upstream's iptables mode, no firewall without endpoints (its nftables mode
	// has one either way).
	usesFWChain := hasEndpoints && len(lbVIPs) > 0 && len(sourceRanges) > 0
	lbChain := n.external
	if usesFWChain {
		lbChain = n.firewall
	}

	var internalTarget, internalComment, externalTarget, externalComment string
	if rt.RejectUnserved {
		internalTarget, externalTarget = "REJECT", "REJECT"
		internalComment = n.port + " has no endpoints"
		externalComment = internalComment
	} else {
		if !hasInternal {
			internalTarget, internalComment = "DROP", n.port+" has no local endpoints"
		}
		if !hasExternal {
			externalTarget, externalComment = "DROP", n.port+" has no local endpoints"
		}
	}
	reject := func(rl *Rule, target string) *Rule {
		if target == "REJECT" {
			// iptables-save prints the default ICMP type explicitly.
			if cfg.isIPv6() {
				return rl.Jump("REJECT", "--reject-with", "icmp6-port-unreachable")
			}
			return rl.Jump("REJECT", "--reject-with", "icmp-port-unreachable")
		}
		return rl.Jump(target)
	}

	// ClusterIP.
	if hasInternal {
		r.entry(TableNAT, ChainServices, r.portRule(n.port+" cluster IP", sp.ClusterIP, sp.Port).Jump(internalChain))
	} else {
		r.entry(TableFilter, ChainServices, reject(r.portRule(internalComment, sp.ClusterIP, sp.Port), internalTarget))
	}

	// External IPs.
	for _, ip := range externalIPs {
		if hasEndpoints {
			r.entry(TableNAT, ChainServices, r.portRule(n.port+" external IP", ip, sp.Port).Jump(n.external))
		}
		if !hasExternal {
			r.entry(TableFilter, ChainExternalServices, reject(r.portRule(externalComment, ip, sp.Port), externalTarget))
		}
	}

	// Load balancer VIPs.
	for _, ip := range lbVIPs {
		if hasEndpoints {
			r.entry(TableNAT, ChainServices, r.portRule(n.port+" loadbalancer IP", ip, sp.Port).Jump(lbChain))
		}
		if usesFWChain {
			r.entry(TableFilter, ChainProxyFirewall,
				r.portRule(n.port+" traffic not accepted by "+n.firewall, ip, sp.Port).Jump("DROP"))
		}
	}
	if !hasExternal {
		for _, ip := range lbVIPs {
			r.entry(TableFilter, ChainExternalServices, reject(r.portRule(externalComment, ip, sp.Port), externalTarget))
		}
	}

	// NodePort (not subject to loadBalancerSourceRanges, as upstream).
	if sp.NodePort != 0 {
		if hasEndpoints {
			if cfg.localhostNodePorts() && cfg.CountLocalhostNodePorts {
				r.entry(TableNAT, ChainNodePorts, NewRule().Dest("127.0.0.0/8", false).Comment(n.port).
					DPort(n.protocol, sp.NodePort).Match("nfacct", "--nfacct-name", nfacctLocalhostAccepted).Jump(n.external))
			}
			r.entry(TableNAT, ChainNodePorts, r.portRule(n.port, netip.Addr{}, sp.NodePort).Jump(n.external))
		}
		if !hasExternal {
			rl := NewRule().Comment(externalComment).Match("addrtype", "--dst-type", "LOCAL").DPort(n.protocol, sp.NodePort)
			r.entry(TableFilter, ChainExternalServices, reject(rl, externalTarget))
		}
	}

	// Health check node port: accepted whether or not there are local endpoints.
	if sp.HealthCheckNodePort != 0 {
		r.entry(TableFilter, ChainNodePorts, NewRule().Comment(n.port+" health check node port").
			DPort("tcp", sp.HealthCheckNodePort).Jump("ACCEPT"))
	}

	// Chains. The masquerade rule of internal traffic goes first in the internal
	// policy chain.
	var internalMasq *Rule
	if hasInternal && (cfg.MasqueradeAll || cfg.localDetectorImplemented()) {
		// Off-cluster clients may route the service range to any node, which may
		// then forward to an endpoint elsewhere: masquerade so replies come back.
		internalMasq = r.portRule(n.port+" cluster IP", sp.ClusterIP, sp.Port)
		if !cfg.MasqueradeAll {
			cfg.ifNotLocal(internalMasq)
		}
		internalMasq.Jump(ChainMarkMasq)
	}
	if usesExternalChain {
		r.chain(n.external, r.externalChain(&rt, externalPolicyChain))
	}
	if usesFWChain {
		r.chain(n.firewall, r.firewallChain(lbVIPs, sourceRanges))
	}
	if usesClusterChain {
		var head []*Rule
		if internalChain == n.clusterPolicy {
			head = append(head, internalMasq)
		}
		r.chain(n.clusterPolicy, r.policyChain(head, clusterEps))
	}
	if usesLocalChain {
		var head []*Rule
		if internalChain == n.localPolicy {
			head = append(head, internalMasq)
		}
		r.chain(n.localPolicy, r.policyChain(head, localEps))
	}
	seen := make(map[string]bool, len(reachable))
	for _, ep := range reachable {
		chain := n.endpointChain(ep)
		if seen[chain] {
			continue
		}
		seen[chain] = true
		r.chain(chain, r.endpointChain(ep, chain))
	}
}

// externalChain handles traffic to NodePorts, external IPs and LB VIPs before the
// policy chain: masquerade for Cluster policy; for Local policy, short-circuit
// traffic from local pods and from the node itself to the Cluster policy chain.
func (r *serviceRenderer) externalChain(rt *model.Routing, externalPolicyChain string) []*Rule {
	cfg, n := r.cfg, &r.names
	var rules []*Rule
	if rt.MasqueradeExternal {
		// Endpoints may be on other nodes: masquerade so replies come back here.
		rules = append(rules, NewRule().Comment("masquerade traffic for "+n.port+" external destinations").Jump(ChainMarkMasq))
	} else if rt.ShortCircuitLocal {
		if cfg.localDetectorImplemented() {
			// Pod -> external destination traffic skips the traffic policy, as if
			// it went out to the load balancer and came back.
			rl := NewRule()
			cfg.ifLocal(rl)
			rules = append(rules, rl.Comment("pod traffic for "+n.port+" external destinations").Jump(n.clusterPolicy))
		}
		// Node-originated traffic picks a local (often the VIP) source address, so
		// it must be masqueraded, and it also bypasses the traffic policy.
		rules = append(rules,
			NewRule().Comment("masquerade LOCAL traffic for "+n.port+" external destinations").
				Match("addrtype", "--src-type", "LOCAL").Jump(ChainMarkMasq),
			NewRule().Comment("route LOCAL traffic for "+n.port+" external destinations").
				Match("addrtype", "--src-type", "LOCAL").Jump(n.clusterPolicy),
		)
	}
	if rt.ExternalServed {
		rules = append(rules, NewRule().Jump(externalPolicyChain))
	}
	return rules
}

// firewallChain lets traffic to the LB VIPs from the source ranges through to the
// external chain; the rest is not DNATed and is dropped by KUBE-PROXY-FIREWALL in
// the filter table. When a range holds the node's IP, the VIPs are allowed as
// sources too: a VIP configured as a local address makes the node's own traffic to
// it carry the VIP as source.
func (r *serviceRenderer) firewallChain(lbVIPs []netip.Addr, ranges []netip.Prefix) []*Rule {
	n := &r.names
	comment := n.port + " loadbalancer IP"
	var rules []*Rule
	allowFromNode := false
	for _, p := range ranges {
		rules = append(rules, NewRule().Source(p.String(), false).Comment(comment).Jump(n.external))
		if r.cfg.NodeIP.IsValid() && p.Contains(r.cfg.NodeIP) {
			allowFromNode = true
		}
	}
	if allowFromNode {
		for _, ip := range lbVIPs {
			rules = append(rules, NewRule().Source(HostPrefix(ip), false).Comment(comment).Jump(n.external))
		}
	}
	// A rule without target: it only documents where the rest of the traffic goes.
	return append(rules, NewRule().Comment("other traffic to "+n.port+" will be dropped by KUBE-PROXY-FIREWALL"))
}

// policyChain selects an endpoint chain at random, upstream's
// writeServiceToEndpointRules: with session affinity, a client seen recently by an
// endpoint goes back to it; otherwise rule i matches with probability 1/(N-i), the
// last one always. head rules come first (the internal masquerade rule).
func (r *serviceRenderer) policyChain(head []*Rule, eps []*model.Endpoint) []*Rule {
	n := &r.names
	rules := make([]*Rule, 0, len(head)+2*len(eps))
	for _, h := range head {
		if h != nil {
			rules = append(rules, h)
		}
	}
	comment := func(rl *Rule, ep *model.Endpoint) *Rule {
		if !r.cfg.LargeCluster {
			rl.Comment(n.port + " -> " + ep.String())
		}
		return rl
	}
	if r.sp.SessionAffinity() {
		for _, ep := range eps {
			chain := n.endpointChain(ep)
			rules = append(rules, comment(NewRule(), ep).
				Match("recent", "--rcheck", "--seconds", strconv.Itoa(int(r.sp.StickyMaxAgeSeconds)), "--reap",
					"--name", chain, "--mask", r.recentMask(), "--rsource").
				Jump(chain))
		}
	}
	for i, ep := range eps {
		rl := comment(NewRule(), ep)
		if i < len(eps)-1 {
			rl.Match("statistic", "--mode", "random", "--probability", probability(len(eps)-i))
		}
		rules = append(rules, rl.Jump(n.endpointChain(ep)))
	}
	return rules
}

// endpointChain masquerades hairpin traffic (an endpoint reaching itself through the
// Service) and DNATs to the endpoint, recording the client for session affinity.
func (r *serviceRenderer) endpointChain(ep *model.Endpoint, chain string) []*Rule {
	n := &r.names
	masq := NewRule().Source(HostPrefix(ep.IP), false)
	dnat := NewRule().Protocol(n.protocol)
	if !r.cfg.LargeCluster {
		masq.Comment(n.port)
		dnat.Comment(n.port)
	}
	if r.sp.SessionAffinity() {
		dnat.Match("recent", "--set", "--name", chain, "--mask", r.recentMask(), "--rsource")
	}
	dnat.Match(n.protocol).Jump("DNAT", "--to-destination", ep.String())
	return []*Rule{masq.Jump(ChainMarkMasq), dnat}
}

// recentMask is the default "-m recent --mask" that iptables-save prints.
func (r *serviceRenderer) recentMask() string {
	if r.cfg.isIPv6() {
		return "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
	}
	return "255.255.255.255"
}
