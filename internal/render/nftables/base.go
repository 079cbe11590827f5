package nftables

import (
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"
)

// TableComment is the comment on the kproxy table (upstream's, for drop-in parity).
const TableComment = "rules for kube-proxy"

// RenderBase renders the table-wide part of the ruleset: base chains and their jumps,
// the dispatch chains, and the shared sets and maps that service fragments fill.
// cfg must be valid (see Config.Validate).
func RenderBase(cfg *Config) Fragment {
	ipX := cfg.ipX()
	addr := cfg.addrType()
	var f Fragment

	hooked := func(name string, t knftables.BaseChainType, h knftables.BaseChainHook, p knftables.BaseChainPriority, rules ...Rule) {
		f.Chains = append(f.Chains, Chain{Name: name, Hook: &BaseChain{Type: t, Hook: h, Priority: p}, Rules: rules})
	}
	jump := func(target string) Rule { return Rule{Text: "jump " + target} }
	newJump := func(target string) Rule { return Rule{Text: "ct state new jump " + target} }
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
	regular(chainMasquerading,
		Rule{Text: "mark and " + mark + " != 0 mark set mark xor " + mark + " masquerade fully-random"},
		// Hairpin: a pod reaching itself through a Service must be masqueraded or it
		// would see its own address as the source and answer itself directly.
		Rule{Text: "ct status dnat " + ipX + " saddr . " + ipX + " daddr . meta l4proto . th dport @" + setHairpinConnections + " masquerade fully-random"},
	)

	clusterIPsCheck := []Rule{{
		Text:    ipX + " daddr @" + setClusterIPs + " reject",
		Comment: "Reject traffic to invalid ports of ClusterIPs",
	}}
	if len(cfg.ServiceCIDRs) > 0 {
		cidrs := make([]string, len(cfg.ServiceCIDRs))
		for i, p := range cfg.ServiceCIDRs {
			cidrs[i] = p.Masked().String()
		}
		clusterIPsCheck = append(clusterIPsCheck, Rule{
			Text:    ipX + " daddr { " + strings.Join(cidrs, ", ") + " } drop",
			Comment: "Drop traffic to unallocated ClusterIPs",
		})
	}
	regular(chainClusterIPsCheck, clusterIPsCheck...)

	f.Chains = append(f.Chains, Chain{
		Name:    chainReject,
		Comment: "helper for @no-endpoint-services / @no-endpoint-nodeports",
		Rules:   []Rule{{Text: "reject"}},
	})
	regular(chainServiceEndpointsCheck, Rule{Text: ipX + " daddr . meta l4proto . th dport vmap @" + mapNoEndpointServices})

	nodePortMatch := ipX + " daddr @" + setNodePortIPs
	if cfg.NodePortAddresses.All {
		nodePortMatch = cfg.matchNotLocalhost()
	}
	nodePortChecks := []Rule{{Text: nodePortMatch + " meta l4proto . th dport vmap @" + mapNoEndpointNodePorts}}
	rejected := cfg.LocalhostNodePorts.RejectedProtocols()
	if len(rejected) > 0 {
		// Localhost NodePorts of the protocols nothing serves on loopback are
		// rejected and counted, as upstream (loopback is never DNATed).
		nodePortChecks = append(nodePortChecks, Rule{Text: cfg.matchLocalhost() + " meta l4proto . th dport vmap @" + mapLocalhostNodePortReject})
		for _, p := range rejected {
			counter := LocalhostNodePortRejectedCounter(p)
			f.Counters = append(f.Counters, Counter{Name: counter})
			regular(localhostNodePortRejectChain(p), Rule{Text: "counter name " + strconv.Quote(counter) + " reject"})
		}
	}
	regular(chainNodePortEndpointsChk, nodePortChecks...)
	regular(chainFirewallCheck, Rule{Text: ipX + " daddr . meta l4proto . th dport vmap @" + mapFirewallIPs})

	var services []Rule
	switch {
	case cfg.MasqueradeAll:
		services = append(services, Rule{
			Text:    ipX + " daddr @" + setClusterIPs + " " + cfg.masqueradeRule(),
			Comment: "masquerade all clusterIP traffic",
		})
	case cfg.localDetectorImplemented():
		// Off-cluster clients may route the service range to any node, which may
		// then forward to an endpoint elsewhere: masquerade so replies come back.
		services = append(services, Rule{
			Text:    ipX + " daddr @" + setClusterIPs + " " + cfg.ifNotLocal() + " " + cfg.masqueradeRule(),
			Comment: "masquerade clusterIP traffic from outside cluster",
		})
	}
	services = append(services, Rule{Text: ipX + " daddr . meta l4proto . th dport vmap @" + mapServiceIPs})
	if cfg.NodePortAddresses.All {
		services = append(services, Rule{Text: "fib daddr type local " + cfg.matchNotLocalhost() + " meta l4proto . th dport vmap @" + mapServiceNodePorts})
	} else {
		services = append(services, Rule{Text: nodePortMatch + " meta l4proto . th dport vmap @" + mapServiceNodePorts})
	}
	regular(chainServices, services...)

	set := func(name, typ, comment string) {
		f.Containers = append(f.Containers, Container{Name: name, Type: typ, Comment: comment})
	}
	vmap := func(name, typ, comment string) {
		f.Containers = append(f.Containers, Container{Name: name, IsMap: true, Type: typ, Comment: comment})
	}
	set(setClusterIPs, addr, "Active ClusterIPs")
	set(setHairpinConnections, addr+" . "+addr+" . inet_proto . inet_service", "service hairpin connections")
	if !cfg.NodePortAddresses.All {
		set(setNodePortIPs, addr, "IPs that accept NodePort traffic")
		for _, ip := range cfg.NodePortAddresses.IPs {
			if ip.IsLoopback() || !cfg.hasFamily(ip) {
				continue
			}
			f.Elements = append(f.Elements, Element{Container: setNodePortIPs, Key: ip.String()})
		}
	}
	vmap(mapFirewallIPs, addr+" . inet_proto . inet_service : verdict", "destinations that are subject to LoadBalancerSourceRanges")
	vmap(mapNoEndpointNodePorts, "inet_proto . inet_service : verdict", "vmap to drop or reject packets to service nodeports with no endpoints")
	vmap(mapNoEndpointServices, addr+" . inet_proto . inet_service : verdict", "vmap to drop or reject packets to services with no endpoints")
	vmap(mapServiceIPs, addr+" . inet_proto . inet_service : verdict", "ClusterIP, ExternalIP and LoadBalancer IP traffic")
	vmap(mapServiceNodePorts, "inet_proto . inet_service : verdict", "NodePort traffic")
	if len(rejected) > 0 {
		vmap(mapLocalhostNodePortReject, "inet_proto . inet_service : verdict", "localhost NodePorts rejected by kube-proxy")
	}

	sortFragment(&f)
	return f
}
