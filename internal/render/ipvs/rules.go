package ipvs

import (
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/ipvs"
	ipt "github.com/kproxy/kproxy/internal/render/iptables"
)

// chainOrder lists the ipvs mode's chains (upstream's iptablesChains) sorted by
// table and name, as render/iptables' Fragment keeps them.
var chainOrder = []struct {
	table ipt.Table
	name  string
}{
	{ipt.TableFilter, ipt.ChainForward},
	{ipt.TableFilter, ChainIPVSFilter},
	{ipt.TableFilter, ChainIPVSOutFilter},
	{ipt.TableFilter, ChainNodePort},
	{ipt.TableFilter, ipt.ChainProxyFirewall},
	{ipt.TableFilter, ChainSourceRangesFirewall},
	{ipt.TableNAT, ChainLoadBalancer},
	{ipt.TableNAT, ipt.ChainMarkMasq},
	{ipt.TableNAT, ChainNodePort},
	{ipt.TableNAT, ipt.ChainPostrouting},
	{ipt.TableNAT, ipt.ChainServices},
}

// rulesBuilder collects the rules of each chain in the order upstream writes them.
type rulesBuilder struct {
	cfg    *Config
	chains map[ipt.Table]map[string][]string
}

func (b *rulesBuilder) add(table ipt.Table, chain string, r *ipt.Rule) {
	b.chains[table][chain] = append(b.chains[table][chain], r.String())
}

// set starts a rule matching set id in the directions dirs ("dst,dst").
func (b *rulesBuilder) set(r *ipt.Rule, id SetID, dirs string) *ipt.Rule {
	return r.Match("set", "--match-set", SetName(id, b.cfg.Family), dirs)
}

// commentedSet is upstream's "-m comment --comment <the set's comment> -m set
// --match-set NAME DIRS".
func (b *rulesBuilder) commentedSet(id SetID, dirs string) *ipt.Rule {
	return b.set(ipt.NewRule().Comment(setDefs[id].comment), id, dirs)
}

// setJumps is upstream's ipsetWithIptablesChain: a rule per non-empty set,
// jumping from a chain to a target. The Local NodePort sets come before their
// masquerading counterparts (RETURN first).
var setJumps = []struct {
	set      SetID
	table    ipt.Table
	from, to string
	dirs     string
	proto    string
}{
	{SetLoopBack, ipt.TableNAT, ipt.ChainPostrouting, "MASQUERADE", "dst,dst,src", ""},
	{SetLoadBalancer, ipt.TableNAT, ipt.ChainServices, ChainLoadBalancer, "dst,dst", ""},
	{SetLoadBalancerLocal, ipt.TableNAT, ChainLoadBalancer, "RETURN", "dst,dst", ""},
	{SetNodePortLocalTCP, ipt.TableNAT, ChainNodePort, "RETURN", "dst", "tcp"},
	{SetNodePortTCP, ipt.TableNAT, ChainNodePort, ipt.ChainMarkMasq, "dst", "tcp"},
	{SetNodePortLocalUDP, ipt.TableNAT, ChainNodePort, "RETURN", "dst", "udp"},
	{SetNodePortUDP, ipt.TableNAT, ChainNodePort, ipt.ChainMarkMasq, "dst", "udp"},
	{SetNodePortLocalSCTP, ipt.TableNAT, ChainNodePort, "RETURN", "dst,dst", "sctp"},
	{SetNodePortSCTP, ipt.TableNAT, ChainNodePort, ipt.ChainMarkMasq, "dst,dst", "sctp"},
	{SetLoadBalancerFW, ipt.TableFilter, ipt.ChainProxyFirewall, ChainSourceRangesFirewall, "dst,dst", ""},
	{SetLoadBalancerSourceCIDR, ipt.TableFilter, ChainSourceRangesFirewall, "RETURN", "dst,dst,src", ""},
	{SetLoadBalancerSourceIP, ipt.TableFilter, ChainSourceRangesFirewall, "RETURN", "dst,dst,src", ""},
}

// renderRules renders upstream's writeIptablesRules: the whole content of the
// ipvs mode's chains, which depends on the Services only through which sets are
// empty (a set without entries gets no rule) and the LB VIPs the node may not
// reach. Upstream declares (flushes) and rewrites these chains at every sync.
func renderRules(cfg *Config, nonEmpty *[numSets]bool, nodeBlocked []ipvs.Key) ipt.Fragment {
	b := &rulesBuilder{cfg: cfg, chains: map[ipt.Table]map[string][]string{ipt.TableFilter: {}, ipt.TableNAT: {}}}
	nat, filter := ipt.TableNAT, ipt.TableFilter
	mark := ipt.MasqueradeMark(cfg.MasqueradeBit)
	markMask := mark + "/" + mark

	// Connections from the node to itself never go through IPVS's NAT here.
	loopback := "127.0.0.0/8"
	if cfg.isIPv6() {
		loopback = "::1/128"
	}
	b.add(nat, ipt.ChainServices, ipt.NewRule().Source(loopback, false).Jump("RETURN"))

	for _, j := range setJumps {
		if !nonEmpty[j.set] {
			continue
		}
		r := b.commentedSet(j.set, j.dirs)
		if j.proto != "" {
			r.Protocol(j.proto)
		}
		b.add(j.table, j.from, r.Jump(j.to))
	}

	if nonEmpty[SetClusterIP] {
		switch {
		case cfg.MasqueradeAll:
			b.add(nat, ipt.ChainServices, b.commentedSet(SetClusterIP, "dst,dst").Jump(ipt.ChainMarkMasq))
		case cfg.LocalDetector.Implemented():
			// Off-cluster clients may route the Service range to any node, which
			// may then send to an endpoint elsewhere: masquerade so replies come
			// back.
			b.add(nat, ipt.ChainServices, b.commentedSet(SetClusterIP, "dst,dst").
				MatchLocal(&cfg.LocalDetector, true).Jump(ipt.ChainMarkMasq))
		default:
			// kube-ipvs0 holds every VIP, so the node picks a VIP as the source
			// of its own connections to a VIP: masquerade those.
			b.add(nat, ipt.ChainServices, b.commentedSet(SetClusterIP, "src,dst").Jump(ipt.ChainMarkMasq))
		}
	}

	// External IPs: accepted from off the node (not from a bridge port, not
	// from a local source) and when the address is local anyway (GCE-style load
	// balancers).
	externalIPRules := func(id SetID) {
		b.add(nat, ipt.ChainServices, b.commentedSet(id, "dst,dst").
			Match("physdev", "!", "--physdev-is-in").Match("addrtype", "!", "--src-type", "LOCAL").Jump("ACCEPT"))
		b.add(nat, ipt.ChainServices, b.commentedSet(id, "dst,dst").
			Match("addrtype", "--dst-type", "LOCAL").Jump("ACCEPT"))
	}
	if nonEmpty[SetExternalIP] {
		b.add(nat, ipt.ChainServices, b.commentedSet(SetExternalIP, "dst,dst").Jump(ipt.ChainMarkMasq))
		externalIPRules(SetExternalIP)
	}
	if nonEmpty[SetExternalIPLocal] {
		externalIPRules(SetExternalIPLocal)
	}

	b.add(nat, ipt.ChainServices, ipt.NewRule().Match("addrtype", "--dst-type", "LOCAL").Jump(ChainNodePort))
	b.add(nat, ChainLoadBalancer, ipt.NewRule().Jump(ipt.ChainMarkMasq))
	b.add(filter, ChainSourceRangesFirewall, ipt.NewRule().Jump("DROP"))

	// For IPVS, traffic from the node to a VIP has the VIP as source too.
	// "--vaddr" is the bare address, as upstream writes it and as iptables-save
	// prints a full mask for libxt_ipvs (unlike -s, which it prints with /32).
	for _, k := range nodeBlocked {
		b.add(filter, ChainIPVSOutFilter, ipt.NewRule().Source(ipt.HostPrefix(k.Address), false).
			Match("ipvs", "--vproto", protocolNumber(k.Protocol), "--vaddr", k.Address.String(), "--vport", strconv.Itoa(int(k.Port))).
			Jump("DROP"))
	}

	// Accept what IPVS serves, in case other rules would drop it; last in
	// KUBE-SERVICES.
	for _, id := range []SetID{SetClusterIP, SetLoadBalancer} {
		if nonEmpty[id] {
			b.add(nat, ipt.ChainServices, b.set(ipt.NewRule(), id, "dst,dst").Jump("ACCEPT"))
		}
	}

	// Forward what was marked for masquerading (NodePort traffic) even when the
	// FORWARD policy is not ACCEPT, and the rest of those connections. (Unlike
	// the iptables mode, no drop of conntrack-INVALID packets.)
	b.add(filter, ipt.ChainForward, ipt.NewRule().Comment("kubernetes forwarding rules").
		Match("mark", "--mark", markMask).Jump("ACCEPT"))
	b.add(filter, ipt.ChainForward, ipt.NewRule().Comment("kubernetes forwarding conntrack rule").
		Match("conntrack", "--ctstate", "RELATED,ESTABLISHED").Jump("ACCEPT"))

	// Health check node ports are accepted, whether or not the set is empty.
	b.add(filter, ChainNodePort, b.commentedSet(SetHealthCheckNodePort, "dst").Jump("ACCEPT"))

	// Traffic to Service addresses on ports no virtual server serves would reach
	// the node's own sockets (kube-ipvs0 makes them local): reject new
	// connections (kubernetes#72236).
	for _, f := range []struct {
		set  SetID
		dirs string
	}{
		{SetLoadBalancer, "dst,dst"}, {SetClusterIP, "dst,dst"}, {SetExternalIP, "dst,dst"},
		{SetExternalIPLocal, "dst,dst"}, {SetHealthCheckNodePort, "dst"},
	} {
		b.add(filter, ChainIPVSFilter, b.set(ipt.NewRule(), f.set, f.dirs).Jump("RETURN"))
	}
	reject := "icmp-port-unreachable" // iptables-save prints REJECT's default
	if cfg.isIPv6() {
		reject = "icmp6-port-unreachable"
	}
	b.add(filter, ChainIPVSFilter, b.set(ipt.NewRule().Match("conntrack", "--ctstate", "NEW"), SetIPVSAddresses, "dst").
		Jump("REJECT", "--reject-with", reject))

	b.add(nat, ipt.ChainPostrouting, ipt.NewRule().Match("mark", "!", "--mark", markMask).Jump("RETURN"))
	// Clear the mark so the packet is not masqueraded again if it re-traverses
	// the stack (upstream writes --xor-mark, which iptables-save prints so).
	b.add(nat, ipt.ChainPostrouting, ipt.NewRule().Jump("MARK", "--set-xmark", mark+"/0x0"))
	b.add(nat, ipt.ChainPostrouting, ipt.NewRule().Comment("kubernetes service traffic requiring SNAT").
		Jump("MASQUERADE", "--random-fully"))
	// Upstream writes --or-mark.
	b.add(nat, ipt.ChainMarkMasq, ipt.NewRule().Jump("MARK", "--set-xmark", markMask))

	var f ipt.Fragment
	for _, c := range chainOrder {
		f.Chains = append(f.Chains, ipt.Chain{Table: c.table, Name: c.name, Rules: b.chains[c.table][c.name]})
	}
	return f
}

// protocolNumber is the protocol as libxt_ipvs saves --vproto: its number.
func protocolNumber(p v1.Protocol) string {
	switch p {
	case v1.ProtocolUDP:
		return "17"
	case v1.ProtocolSCTP:
		return "132"
	}
	return "6"
}

// JumpRules returns upstream's jumps from the built-in chains to the ipvs mode's
// (iptablesJumpChain), in the order upstream ensures them: each is inserted at
// the top when missing, so the last one ends up first.
func JumpRules() []ipt.Jump {
	jump := func(table ipt.Table, from, to, comment string) ipt.Jump {
		return ipt.Jump{Table: table, Chain: from, Target: to, Args: []string{"-m", "comment", "--comment", comment, "-j", to}}
	}
	return []ipt.Jump{
		jump(ipt.TableNAT, "OUTPUT", ipt.ChainServices, "kubernetes service portals"),
		jump(ipt.TableNAT, "PREROUTING", ipt.ChainServices, "kubernetes service portals"),
		jump(ipt.TableNAT, "POSTROUTING", ipt.ChainPostrouting, "kubernetes postrouting rules"),
		jump(ipt.TableFilter, "FORWARD", ipt.ChainForward, "kubernetes forwarding rules"),
		jump(ipt.TableFilter, "INPUT", ChainNodePort, "kubernetes health check rules"),
		jump(ipt.TableFilter, "INPUT", ipt.ChainProxyFirewall, "kube-proxy firewall rules"),
		jump(ipt.TableFilter, "FORWARD", ipt.ChainProxyFirewall, "kube-proxy firewall rules"),
		jump(ipt.TableFilter, "INPUT", ChainIPVSFilter, "kubernetes ipvs access filter"),
		jump(ipt.TableFilter, "OUTPUT", ChainIPVSOutFilter, "kubernetes ipvs access filter"),
	}
}

// Chains are the ipvs mode's chains of table, sorted (upstream's iptablesChains):
// what a full sync declares and --cleanup deletes.
func Chains(table ipt.Table) []string {
	var out []string
	for _, c := range chainOrder {
		if c.table == table {
			out = append(out, c.name)
		}
	}
	return out
}
