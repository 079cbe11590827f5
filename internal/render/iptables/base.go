package iptables

// RenderBase renders the chains that are not per Service, with the rules that do not
// depend on Services, as upstream's syncProxyRules writes them. Their rules are tail
// rules: Services' entries come before them (see Fragment). cfg must be valid.
func RenderBase(cfg *Config) Fragment {
	var f Fragment
	chain := func(table Table, name string, rules ...*rule) {
		c := Chain{Table: table, Name: name, Rules: make([]string, len(rules))}
		for i, r := range rules {
			c.Rules[i] = r.String()
		}
		f.Chains = append(f.Chains, c)
	}
	mark := cfg.masqueradeMark()
	markMask := mark + "/" + mark

	// filter
	chain(TableFilter, ChainServices)
	chain(TableFilter, ChainExternalServices)
	chain(TableFilter, ChainNodePorts)
	chain(TableFilter, ChainProxyFirewall)
	var forward []*rule
	if !cfg.TCPBeLiberal {
		// Packets conntrack deems INVALID would otherwise reach endpoints
		// un-DNATed and reset connections (kubernetes#74839, #117924).
		r := newRule().match("conntrack", "--ctstate", "INVALID")
		if cfg.CountInvalidDrops {
			r.match("nfacct", "--nfacct-name", nfacctInvalidDropped)
		}
		forward = append(forward, r.jump("DROP"))
	}
	forward = append(forward,
		// Forward what was marked for masquerading (NodePort traffic) even when the
		// FORWARD policy is not ACCEPT, and the rest of those connections.
		newRule().comment("kubernetes forwarding rules").match("mark", "--mark", markMask).jump("ACCEPT"),
		newRule().comment("kubernetes forwarding conntrack rule").match("conntrack", "--ctstate", "RELATED,ESTABLISHED").jump("ACCEPT"),
	)
	chain(TableFilter, ChainForward, forward...)
	if cfg.localhostNodePorts() {
		// route_localnet lets packets to 127.0.0.0/8 arrive from other hosts
		// (kubernetes#90259): drop those that are not replies or DNATed NodePort
		// traffic. kubelet writes the same rule.
		chain(TableFilter, ChainKubeletFirewall,
			newRule().source("127.0.0.0/8", true).dest("127.0.0.0/8", false).
				comment("block incoming localnet connections").
				match("conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT").jump("DROP"))
	}

	// nat
	chain(TableNAT, ChainServices, nodePortJumps(cfg)...)
	chain(TableNAT, ChainNodePorts)
	chain(TableNAT, ChainPostrouting,
		newRule().match("mark", "!", "--mark", markMask).jump("RETURN"),
		// Clear the mark so the packet is not masqueraded again if it re-traverses
		// the stack.
		newRule().jump("MARK", "--set-xmark", mark+"/0x0"),
		newRule().comment("kubernetes service traffic requiring SNAT").jump("MASQUERADE", "--random-fully"),
	)
	chain(TableNAT, ChainMarkMasq, newRule().jump("MARK", "--set-xmark", markMask))
	sortChains(f.Chains)
	return f
}

const nodePortsComment = "kubernetes service nodeports; NOTE: this must be the last rule in this chain"

// nodePortJumps are the last rules of nat KUBE-SERVICES: to KUBE-NODEPORTS for
// traffic to the addresses serving NodePorts.
func nodePortJumps(cfg *Config) []*rule {
	if cfg.NodePortAddresses.All {
		r := newRule()
		// Localhost NodePorts never work on IPv6, and on IPv4 only with
		// route_localnet.
		if cfg.isIPv6() {
			r.dest("::1/128", true)
		} else if !cfg.localhostNodePorts() {
			r.dest("127.0.0.0/8", true)
		}
		return []*rule{r.comment(nodePortsComment).match("addrtype", "--dst-type", "LOCAL").jump(ChainNodePorts)}
	}
	var out []*rule
	for _, ip := range cfg.NodePortAddresses.IPs {
		if !cfg.hasFamily(ip) || ip.IsLoopback() && !cfg.localhostNodePorts() {
			continue
		}
		out = append(out, newRule().dest(hostPrefix(ip), false).comment(nodePortsComment).jump(ChainNodePorts))
	}
	return out
}

// Jump is a rule in a built-in chain jumping to one of kproxy's chains. iptables-
// restore cannot add it without flushing the built-in chain, so the dataplane
// ensures it (check, else insert at the top) on every full sync, as upstream does.
type Jump struct {
	Table Table
	// Chain is the built-in chain holding the rule; Target the chain it jumps to,
	// which must exist first.
	Chain  string
	Target string
	// Args are the rule's arguments, unquoted, one per element (as given to
	// "iptables -I CHAIN"), ending with "-j Target".
	Args []string
}

// JumpRules returns upstream's jump rules (iptablesJumpChains, then the kubelet
// ones), in the order upstream ensures them: each is inserted at the top, so the
// last one ends up first.
func JumpRules() []Jump {
	newConn := []string{"-m", "conntrack", "--ctstate", "NEW"}
	jump := func(table Table, target, chain, comment string, extra []string) Jump {
		args := append([]string{}, extra...)
		if comment != "" {
			args = append(args, "-m", "comment", "--comment", comment)
		}
		return Jump{Table: table, Chain: chain, Target: target, Args: append(args, "-j", target)}
	}
	return []Jump{
		jump(TableFilter, ChainExternalServices, "INPUT", "kubernetes externally-visible service portals", newConn),
		jump(TableFilter, ChainExternalServices, "FORWARD", "kubernetes externally-visible service portals", newConn),
		jump(TableFilter, ChainNodePorts, "INPUT", "kubernetes health check service ports", nil),
		jump(TableFilter, ChainServices, "FORWARD", "kubernetes service portals", newConn),
		jump(TableFilter, ChainServices, "OUTPUT", "kubernetes service portals", newConn),
		jump(TableFilter, ChainForward, "FORWARD", "kubernetes forwarding rules", nil),
		jump(TableFilter, ChainProxyFirewall, "INPUT", "kubernetes load balancer firewall", newConn),
		jump(TableFilter, ChainProxyFirewall, "OUTPUT", "kubernetes load balancer firewall", newConn),
		jump(TableFilter, ChainProxyFirewall, "FORWARD", "kubernetes load balancer firewall", newConn),
		jump(TableNAT, ChainServices, "OUTPUT", "kubernetes service portals", nil),
		jump(TableNAT, ChainServices, "PREROUTING", "kubernetes service portals", nil),
		jump(TableNAT, ChainPostrouting, "POSTROUTING", "kubernetes postrouting rules", nil),
		jump(TableFilter, ChainKubeletFirewall, "INPUT", "", nil),
		jump(TableFilter, ChainKubeletFirewall, "OUTPUT", "", nil),
	}
}
