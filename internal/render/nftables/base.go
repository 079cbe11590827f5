package nftables

import (
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/nft"
)

// TableComment is the comment on the kproxy table (upstream's, for drop-in parity).
const TableComment = "rules for kube-proxy"

// RenderBase renders the table-wide part of the ruleset: base chains and their jumps,
// the dispatch chains, and the shared sets and maps that service fragments fill.
// cfg must be valid (see Config.Validate).
func RenderBase(cfg *Config) Fragment {
	types := cfg.setTypes()
	var f Fragment

	hooked := func(name string, t knftables.BaseChainType, h knftables.BaseChainHook, p knftables.BaseChainPriority, rules ...Rule) {
		f.Chains = append(f.Chains, Chain{Name: name, Hook: &BaseChain{Type: t, Hook: h, Priority: p}, Rules: rules})
	}
	jump := func(target string) Rule { return rule(nft.Verdict{Kind: nft.Jump, Chain: target}) }
	newJump := func(target string) Rule {
		return rule(nft.Match{Keys: ctStateKey, Value: nft.CtStateNew}, nft.Verdict{Kind: nft.Jump, Chain: target})
	}
	regular := func(name string, rules ...Rule) {
		f.Chains = append(f.Chains, Chain{Name: name, Rules: rules})
	}

	// Source-range firewall runs before DNAT so it sees the original destination.
	preDNAT := knftables.DNATPriority + "-10"
	hooked(chainFilterPreroutingPreDNAT, knftables.FilterType, knftables.PreroutingHook, preDNAT, newJump(chainFirewallCheck))
	hooked(chainFilterOutputPreDNAT, knftables.FilterType, knftables.OutputHook, preDNAT, newJump(chainFirewallCheck))
	// Reject is only valid in input/forward/output on kernels before 5.9.
	hooked(chainFilterInput, knftables.FilterType, knftables.InputHook, knftables.FilterPriority,
		newJump(chainNodePortEndpointsChk), newJump(chainServiceEndpointsCheck))
	hooked(chainFilterForward, knftables.FilterType, knftables.ForwardHook, knftables.FilterPriority,
		newJump(chainServiceEndpointsCheck), newJump(chainClusterIPsCheck))
	hooked(chainFilterOutput, knftables.FilterType, knftables.OutputHook, knftables.FilterPriority,
		newJump(chainServiceEndpointsCheck), newJump(chainClusterIPsCheck))
	hooked(chainNATPrerouting, knftables.NATType, knftables.PreroutingHook, knftables.DNATPriority, jump(chainServices))
	hooked(chainNATOutput, knftables.NATType, knftables.OutputHook, knftables.DNATPriority, jump(chainServices))
	hooked(chainNATPostrouting, knftables.NATType, knftables.PostroutingHook, knftables.SNATPriority, jump(chainMasquerading))

	mark := cfg.masqueradeMark()
	masquerade := nft.Masquerade{FullyRandom: true}
	regular(chainMasquerading,
		rule(nft.MaskedMatch{Key: nft.Mark, Mask: mark, Neq: true}, nft.MarkSet{Op: nft.BitXor, Value: mark}, masquerade),
		// Hairpin: a pod reaching itself through a Service must be masqueraded or it
		// would see its own address as the source and answer itself directly.
		rule(nft.Match{Keys: ctStatusKey, Value: nft.CtStatusDNAT},
			nft.Match{Keys: cfg.hairpinKey(), Value: nft.SetRef(setHairpinConnections)}, masquerade),
	)

	clusterIPs := nft.Match{Keys: cfg.daddr(), Value: nft.SetRef(setClusterIPs)}
	clusterIPsCheck := []Rule{{
		Stmts:   []nft.Stmt{clusterIPs, nft.Reject{}},
		Comment: "Reject traffic to invalid ports of ClusterIPs",
	}}
	if len(cfg.ServiceCIDRs) > 0 {
		// A set even for one CIDR, as upstream writes it.
		cidrs := make(nft.Set, len(cfg.ServiceCIDRs))
		for i, p := range cfg.ServiceCIDRs {
			cidrs[i] = nft.Prefix(p.Masked())
		}
		clusterIPsCheck = append(clusterIPsCheck, Rule{
			Stmts:   []nft.Stmt{nft.Match{Keys: cfg.daddr(), Value: cidrs}, nft.Verdict{Kind: nft.Drop}},
			Comment: "Drop traffic to unallocated ClusterIPs",
		})
	}
	regular(chainClusterIPsCheck, clusterIPsCheck...)

	f.Chains = append(f.Chains, Chain{
		Name:    chainReject,
		Comment: "helper for @no-endpoint-services / @no-endpoint-nodeports",
		Rules:   []Rule{rule(nft.Reject{})},
	})
	regular(chainServiceEndpointsCheck, rule(nft.VMap{Keys: cfg.dispatchKey(), Map: mapNoEndpointServices}))

	var nodePortMatch nft.Stmt = nft.Match{Keys: cfg.daddr(), Value: nft.SetRef(setNodePortIPs)}
	if cfg.NodePortAddresses.All {
		nodePortMatch = cfg.matchLocalhost(true)
	}
	nodePortChecks := []Rule{rule(nodePortMatch, nft.VMap{Keys: portKey, Map: mapNoEndpointNodePorts})}
	rejected := cfg.LocalhostNodePorts.RejectedProtocols()
	if len(rejected) > 0 {
		// Localhost NodePorts of the protocols nothing serves on loopback are
		// rejected and counted, as upstream (loopback is never DNATed).
		nodePortChecks = append(nodePortChecks, rule(cfg.matchLocalhost(false), nft.VMap{Keys: portKey, Map: mapLocalhostNodePortReject}))
		for _, p := range rejected {
			counter := LocalhostNodePortRejectedCounter(p)
			f.Counters = append(f.Counters, Counter{Name: counter})
			regular(localhostNodePortRejectChain(p), rule(nft.Counter{Name: counter}, nft.Reject{}))
		}
	}
	regular(chainNodePortEndpointsChk, nodePortChecks...)
	regular(chainFirewallCheck, rule(nft.VMap{Keys: cfg.dispatchKey(), Map: mapFirewallIPs}))

	var services []Rule
	switch {
	case cfg.MasqueradeAll:
		services = append(services, Rule{
			Stmts:   []nft.Stmt{clusterIPs, cfg.masqueradeRule()},
			Comment: "masquerade all clusterIP traffic",
		})
	case cfg.localDetectorImplemented():
		// Off-cluster clients may route the service range to any node, which may
		// then forward to an endpoint elsewhere: masquerade so replies come back.
		services = append(services, Rule{
			Stmts:   []nft.Stmt{clusterIPs, cfg.ifNotLocal(), cfg.masqueradeRule()},
			Comment: "masquerade clusterIP traffic from outside cluster",
		})
	}
	services = append(services, rule(nft.VMap{Keys: cfg.dispatchKey(), Map: mapServiceIPs}))
	nodePorts := nft.VMap{Keys: portKey, Map: mapServiceNodePorts}
	if cfg.NodePortAddresses.All {
		services = append(services, rule(nft.Match{Keys: fibDaddrTypeKey, Value: nft.FibLocal}, nodePortMatch, nodePorts))
	} else {
		services = append(services, rule(nodePortMatch, nodePorts))
	}
	regular(chainServices, services...)

	set := func(name string, typ *nft.SetType, comment string) {
		f.Containers = append(f.Containers, Container{Name: name, Type: typ, Comment: comment})
	}
	vmap := func(name string, typ *nft.SetType, comment string) {
		f.Containers = append(f.Containers, Container{Name: name, IsMap: true, Type: typ, Comment: comment})
	}
	set(setClusterIPs, types.addr, "Active ClusterIPs")
	set(setHairpinConnections, types.hairpin, "service hairpin connections")
	if !cfg.NodePortAddresses.All {
		set(setNodePortIPs, types.addr, "IPs that accept NodePort traffic")
		for _, ip := range cfg.NodePortAddresses.IPs {
			if ip.IsLoopback() || !cfg.hasFamily(ip) {
				continue
			}
			f.Elements = append(f.Elements, Element{Container: setNodePortIPs, Key: nft.ElemBuf(nil).Addr(ip).Elem()})
		}
	}
	vmap(mapFirewallIPs, types.addrVerdict, "destinations that are subject to LoadBalancerSourceRanges")
	vmap(mapNoEndpointNodePorts, types.portVerdict, "vmap to drop or reject packets to service nodeports with no endpoints")
	vmap(mapNoEndpointServices, types.addrVerdict, "vmap to drop or reject packets to services with no endpoints")
	vmap(mapServiceIPs, types.addrVerdict, "ClusterIP, ExternalIP and LoadBalancer IP traffic")
	vmap(mapServiceNodePorts, types.portVerdict, "NodePort traffic")
	if len(rejected) > 0 {
		vmap(mapLocalhostNodePortReject, types.portVerdict, "localhost NodePorts rejected by kube-proxy")
	}

	sortFragment(&f)
	return f
}

// rule is a rule of stmts without a comment.
func rule(stmts ...nft.Stmt) Rule { return Rule{Stmts: stmts} }

// One-key selectors, shared by every rule using them.
var (
	ctStateKey      = []nft.Key{nft.CtStateKey}
	ctStatusKey     = []nft.Key{nft.CtStatusKey}
	fibSaddrTypeKey = []nft.Key{nft.FibSaddrType}
	fibDaddrTypeKey = []nft.Key{nft.FibDaddrType}
	l4protoKey      = []nft.Key{nft.L4Proto}
)
