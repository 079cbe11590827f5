package iptables

// RenderBase renders the chains that are not per Service, with the rules that do not
// depend on Services, as upstream's syncProxyRules writes them. Their rules are tail
// rules: Services' entries come before them (see Fragment). cfg must be valid.
func RenderBase(cfg *Config) Fragment {
	var f Fragment
	chain := func(table Table, name string, rules ...*Rule) {
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
	var forward []*Rule
	if !cfg.TCPBeLiberal {
		// Packets conntrack deems INVALID would otherwise reach endpoints
		// un-DNATed and reset connections (kubernetes#74839, #117924).
		r := NewRule().Match("conntrack", "--ctstate", "INVALID")
		if cfg.CountInvalidDrops {
			r.Match("nfacct", "--nfacct-name", nfacctInvalidDropped)
		}
		forward = append(forward, r.Jump("DROP"))
	}
	forward = append(forward,
		// Forward what was marked for masquerading (NodePort traffic) even when the
		// FORWARD policy is not ACCEPT, and the rest of those connections.
		NewRule().Comment("kubernetes forwarding rules").Match("mark", "--mark", markMask).Jump("ACCEPT"),
		NewRule().Comment("kubernetes forwarding conntrack rule").Match("conntrack", "--ctstate", "RELATED,ESTABLISHED").Jump("ACCEPT"),
	)
	chain(TableFilter, ChainForward, forward...)
	if cfg.localhostNodePorts() {
		// route_localnet lets packets to 127.0.0.0/8 arrive from other hosts
		// (kubernetes#90259): drop those that are not replies or DNATed NodePort
		// traffic. kubelet writes the same rule.
		chain(TableFilter, ChainKubeletFirewall,
			NewRule().Source("127.0.0.0/8", true).Dest("127.0.0.0/8", false).
				Comment("block incoming localnet connections").
				Match("conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT").Jump("DROP"))
	}

	// nat
	chain(TableNAT, ChainServices, nodePortJumps(cfg)...)
	chain(TableNAT, ChainNodePorts)
	chain(TableNAT, ChainPostrouting,
		NewRule().Match("mark", "!", "--mark", markMask).Jump("RETURN"),
		// Clear the mark so the packet is not masqueraded again if it re-traverses
		// the stack.
		NewRule().Jump("MARK", "--set-xmark", mark+"/0x0"),
		NewRule().Comment("kubernetes service traffic requiring SNAT").Jump("MASQUERADE", "--random-fully"),
	)
	chain(TableNAT, ChainMarkMasq, NewRule().Jump("MARK", "--set-xmark", markMask))
	sortChains(f.Chains)
	return f
}

const nodePortsComment = "kubernetes service nodeports; NOTE: this must be the last rule in this chain"

// nodePortJumps are the last rules of nat KUBE-SERVICES: to KUBE-NODEPORTS for
// traffic to the addresses serving NodePorts.
func nodePortJumps(cfg *Config) []*Rule {
	if cfg.NodePortAddresses.All {
		r := NewRule()
		// Localhost NodePorts never work on IPv6, and on IPv4 only with
		// route_localnet.
		if cfg.isIPv6() {
			r.Dest("::1/128", true)
		} else if !cfg.localhostNodePorts() {
			r.Dest("127.0.0.0/8", true)
		}
		return []*Rule{r.Comment(nodePortsComment).Match("addrtype", "--dst-type", "LOCAL").Jump(ChainNodePorts)}
	}
	var out []*Rule
	for _, ip := range cfg.NodePortAddresses.IPs {
		if !cfg.hasFamily(ip) || ip.IsLoopback() && !cfg.localhostNodePorts() {
			continue
		}
		out = append(out, NewRule().Dest(HostPrefix(ip), false).Comment(nodePortsComment).Jump(ChainNodePorts))
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
