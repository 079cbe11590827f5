package nftables

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/nft"
)

// RenderService renders one ServicePort: its chains (policy chains selecting an
// endpoint, the external-traffic chain, the firewall chain, per-endpoint chains when
// session affinity is on), its affinity sets, and the elements it adds to the shared
// dispatch sets and maps. It replicates upstream kube-proxy's nftables semantics.
// Endpoints of another family than cfg.Family are ignored, and so is a ServicePort
// of another protocol than TCP, UDP and SCTP (the API server admits no other).
func RenderService(cfg *Config, v *model.ServicePortView) Fragment {
	return renderService(cfg, v, nil)
}

// renderService is RenderService; when scratch is not nil, the elements are
// collected in *scratch (grown as needed and left empty for the next call) and the
// fragment gets a copy of its length. A full sync renders every Service on a few
// goroutines, each with its scratch list: growing 10,000 element lists by
// appending would leave three times their retained size as garbage, which the
// collector chases at the lowered GC target of a full sync.
func renderService(cfg *Config, v *model.ServicePortView, scratch *[]Element) Fragment {
	r := serviceRenderer{cfg: cfg, v: v, sp: v.ServicePort, names: namesFor(&v.ServicePort.Name)}
	if scratch != nil {
		r.f.Elements = (*scratch)[:0]
	}
	r.render()
	if scratch != nil {
		collected := sortElements(r.f.Elements)
		r.f.Elements = make([]Element, len(collected))
		copy(r.f.Elements, collected)
		clear(collected) // drop the strings it points at
		*scratch = collected[:0]
	}
	sortFragment(&r.f)
	return r.f
}

type serviceRenderer struct {
	cfg   *Config
	v     *model.ServicePortView
	sp    *model.ServicePort
	names serviceNames
	f     Fragment
	buf   [48]byte
}

func (r *serviceRenderer) familyEndpoints(eps []*model.Endpoint) []*model.Endpoint {
	out := make([]*model.Endpoint, 0, len(eps))
	for _, ep := range eps {
		if ep != nil && r.cfg.hasFamily(ep.IP) {
			out = append(out, ep)
		}
	}
	return sortedEndpoints(out)
}

func (r *serviceRenderer) element(container string, key, value nft.Elem, comment bool) {
	e := Element{Container: container, Key: key, Value: value}
	if comment {
		e.Comment = truncateComment(r.sp.Name.String())
	}
	r.f.Elements = append(r.f.Elements, e)
}

// elem starts an element in the renderer's buffer (ElemBuf.Elem copies it out).
func (r *serviceRenderer) elem() nft.ElemBuf { return nft.ElemBuf(r.buf[:0]) }

// dispatchKey is "addr . proto . port".
func (r *serviceRenderer) dispatchKey(a netip.Addr, p nft.Proto, port int32) nft.Elem {
	return r.elem().Addr(a).Proto(p).Num(uint32(port)).Elem()
}

func gotoElem(chain string) nft.Elem {
	return nft.VerdictElem(nft.Verdict{Kind: nft.Goto, Chain: chain})
}

// The verdicts of the no-endpoint maps, shared by their elements.
var (
	dropElem   = nft.VerdictElem(nft.Verdict{Kind: nft.Drop})
	rejectElem = gotoElem(chainReject)
)

func (r *serviceRenderer) chain(name string, rules ...Rule) {
	r.f.Chains = append(r.f.Chains, Chain{Name: name, Rules: rules})
}

func (r *serviceRenderer) render() {
	cfg, sp, v := r.cfg, r.sp, r.v
	nproto, known := protocol(sp.Protocol)
	if !sp.ClusterIP.IsValid() || !cfg.hasFamily(sp.ClusterIP) || !known {
		return
	}
	proto := strings.ToLower(string(sp.Protocol))

	clusterEps := r.familyEndpoints(v.ClusterEndpoints)
	localEps := r.familyEndpoints(v.LocalEndpoints)
	reachable := r.familyEndpoints(v.AllReachableEndpoints)
	hasEndpoints := v.HasAnyEndpoints
	affinity := sp.SessionAffinity()

	for _, ep := range reachable {
		if ep.IsLocal {
			r.element(setHairpinConnections, r.elem().Addr(ep.IP).Addr(ep.IP).Proto(nproto).Num(uint32(ep.Port)).Elem(), nft.Elem{}, false)
		}
	}

	// The decisions every mode shares (model.Routing).
	rt := model.DecideRouting(sp, hasEndpoints, len(clusterEps), len(localEps))
	usesClusterChain, usesLocalChain, usesExternalChain := rt.ClusterSelection, rt.LocalSelection, rt.ExternalEntry
	internalChain, hasInternal := r.names.policy(rt.InternalLocal), rt.InternalServed
	externalPolicyChain, hasExternal := r.names.policy(rt.ExternalLocal), rt.ExternalServed

	// Verdicts for the filter-hook maps, for traffic the nat rules do not take.
	unserved := dropElem
	if rt.RejectUnserved {
		unserved = rejectElem
	}

	r.element(setClusterIPs, r.elem().Addr(sp.ClusterIP).Elem(), nft.Elem{}, false)
	if hasInternal {
		r.element(mapServiceIPs, r.dispatchKey(sp.ClusterIP, nproto, sp.Port), gotoElem(internalChain), false)
	} else {
		r.element(mapNoEndpointServices, r.dispatchKey(sp.ClusterIP, nproto, sp.Port), unserved, true)
	}

	external := make([]netip.Addr, 0, len(sp.ExternalIPs)+len(sp.LoadBalancerVIPs))
	for _, ip := range sp.ExternalIPs {
		if cfg.hasFamily(ip) {
			external = append(external, ip)
		}
	}
	var lbVIPs []netip.Addr
	for _, ip := range sp.LoadBalancerVIPs {
		if cfg.hasFamily(ip) {
			lbVIPs = append(lbVIPs, ip)
		}
	}
	external = append(external, lbVIPs...)
	for _, ip := range external {
		key := r.dispatchKey(ip, nproto, sp.Port)
		if usesExternalChain {
			r.element(mapServiceIPs, key, gotoElem(r.names.external), false)
		}
		if !hasExternal {
			r.element(mapNoEndpointServices, key, unserved, true)
		}
	}

	sourceRanges := r.familyPrefixes(sp.LoadBalancerSourceRanges)
	if len(lbVIPs) > 0 && len(sourceRanges) > 0 {
		r.firewall(lbVIPs, sourceRanges)
		for _, ip := range lbVIPs {
			r.element(mapFirewallIPs, r.dispatchKey(ip, nproto, sp.Port), gotoElem(r.names.firewall), false)
		}
	}

	if sp.NodePort != 0 {
		key := r.elem().Proto(nproto).Num(uint32(sp.NodePort)).Elem()
		// NodePorts are not subject to loadBalancerSourceRanges (as upstream).
		if usesExternalChain {
			r.element(mapServiceNodePorts, key, gotoElem(r.names.external), false)
		}
		if !hasExternal {
			r.element(mapNoEndpointNodePorts, key, unserved, true)
		}
		// Whether or not the Service has endpoints, as upstream.
		if cfg.LocalhostNodePorts.rejects(sp.Protocol) {
			r.element(mapLocalhostNodePortReject, key, gotoElem(localhostNodePortRejectChain(sp.Protocol)), false)
		}
	}

	if usesExternalChain {
		r.externalChain(&rt, externalPolicyChain)
	}

	if affinity || !cfg.EndpointMaps {
		if usesClusterChain {
			r.policyChain(r.names.clusterPolicy, clusterEps, nproto, affinity)
		}
		if usesLocalChain {
			r.policyChain(r.names.localPolicy, localEps, nproto, affinity)
		}
	} else {
		// The frontends through which each policy chain is reached: the ClusterIP
		// through the internal policy; external IPs, LB VIPs and the NodePort through
		// the external chain, which goes to the external policy's chain and
		// short-circuits pods and the node to the cluster chain.
		var externalKeys []netip.AddrPort
		var nodePort uint16
		if usesExternalChain {
			for _, ip := range external {
				externalKeys = append(externalKeys, netip.AddrPortFrom(ip, uint16(sp.Port)))
			}
			nodePort = uint16(sp.NodePort)
		}
		clusterIPKey := netip.AddrPortFrom(sp.ClusterIP, uint16(sp.Port))
		if usesClusterChain {
			var fe frontends
			if !sp.InternalPolicyLocal {
				fe.addrs = append(fe.addrs, clusterIPKey)
			}
			if usesExternalChain {
				fe.addrs = append(fe.addrs, externalKeys...)
				fe.nodePort = nodePort
			}
			r.endpointMaps(r.names.clusterPolicy, false, proto, nproto, fe, clusterEps)
		}
		if usesLocalChain {
			var fe frontends
			if sp.InternalPolicyLocal {
				fe.addrs = append(fe.addrs, clusterIPKey)
			}
			if usesExternalChain && sp.ExternalPolicyLocal {
				fe.addrs = append(fe.addrs, externalKeys...)
				fe.nodePort = nodePort
			}
			r.endpointMaps(r.names.localPolicy, true, proto, nproto, fe, localEps)
		}
	}
	if affinity {
		// One chain and set per endpoint the policy chains jump to (derived from
		// them, so that no rule can reference a missing chain).
		var used []*model.Endpoint
		if usesClusterChain {
			used = append(used, clusterEps...)
		}
		if usesLocalChain {
			used = append(used, localEps...)
		}
		timeout := time.Duration(sp.StickyMaxAgeSeconds) * time.Second
		seen := make(map[netip.AddrPort]bool, len(used))
		for _, ep := range used {
			ap := ep.AddrPort()
			if seen[ap] {
				continue
			}
			seen[ap] = true
			base := endpointNameBase(&sp.Name, ap)
			set := affinitySetName(&sp.Name, ap, sp.StickyMaxAgeSeconds)
			r.f.Containers = append(r.f.Containers, Container{Name: set, Type: cfg.setTypes().addr, Timeout: timeout})
			r.chain(prefixEndpoint+base,
				rule(nft.Update{Set: set, Keys: cfg.saddr()}),
				rule(protoMatch(nproto), nft.DNAT{To: ap}),
			)
		}
	}
}

func (r *serviceRenderer) familyPrefixes(in []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(in))
	for _, p := range in {
		if r.cfg.hasFamily(p.Addr()) {
			out = append(out, p)
		}
	}
	return out
}

// firewall drops traffic to the LB VIPs from outside the source ranges. When a range
// holds the node's IP, the VIPs themselves are allowed as sources: a VIP configured
// as a local address makes node-originated traffic to it carry the VIP as source.
func (r *serviceRenderer) firewall(lbVIPs []netip.Addr, ranges []netip.Prefix) {
	sources := make(nft.Set, 0, len(ranges)+len(lbVIPs))
	allowFromNode := false
	for _, p := range ranges {
		sources = append(sources, nft.Prefix(p.Masked()))
		if r.cfg.NodeIP.IsValid() && p.Contains(r.cfg.NodeIP) {
			allowFromNode = true
		}
	}
	if allowFromNode {
		for _, ip := range lbVIPs {
			sources = append(sources, nft.Addr(ip))
		}
	}
	// A set even for one range, as upstream writes it.
	r.chain(r.names.firewall, rule(nft.Match{Keys: r.cfg.saddr(), Neq: true, Value: sources}, nft.Verdict{Kind: nft.Drop}))
}

// externalChain handles traffic to NodePorts, externalIPs and LB VIPs before the
// policy chain: masquerade for Cluster policy; for Local policy, short-circuit
// traffic from local pods and from the node itself to the cluster endpoints.
func (r *serviceRenderer) externalChain(rt *model.Routing, externalPolicyChain string) {
	cfg := r.cfg
	var rules []Rule
	if rt.MasqueradeExternal {
		// Endpoints may be on other nodes: masquerade so replies come back here.
		rules = append(rules, Rule{Stmts: []nft.Stmt{cfg.masqueradeRule()}, Comment: "masquerade"})
	} else if rt.ShortCircuitLocal {
		toCluster := nft.Verdict{Kind: nft.Goto, Chain: r.names.clusterPolicy}
		if cfg.localDetectorImplemented() {
			// Pod -> external IP traffic skips the traffic policy, as if it went
			// out to the load balancer and came back.
			rules = append(rules, Rule{Stmts: []nft.Stmt{cfg.ifLocal(), toCluster}, Comment: "short-circuit pod traffic"})
		}
		// Node-originated traffic picks a local (often the VIP) source address, so
		// it must be masqueraded, and it also bypasses the traffic policy.
		fromNode := nft.Match{Keys: fibSaddrTypeKey, Value: nft.FibLocal}
		rules = append(rules,
			Rule{Stmts: []nft.Stmt{fromNode, cfg.masqueradeRule()}, Comment: "masquerade local traffic"},
			Rule{Stmts: []nft.Stmt{fromNode, toCluster}, Comment: "short-circuit local traffic"},
		)
	}
	if rt.ExternalServed {
		rules = append(rules, rule(nft.Verdict{Kind: nft.Goto, Chain: externalPolicyChain}))
	}
	r.chain(r.names.external, rules...)
}

// policyChain selects an endpoint uniformly at random. Up to cfg.endpointRulesMax()
// endpoints it uses one rule per endpoint, iptables-style: rule i matches with
// probability 1/(N-i) ("numgen random mod N-i 0"), the last one always. Beyond, one
// rule with an anonymous numgen map. Rules are preferred because the kernel handles
// sets created in a large transaction in quadratic time (each set creation and
// binding walks the table's sets and the transaction), which made a full sync of
// 10,000 Services take 30 s with one anonymous map each (see doc.go).
//
// Without affinity each choice is a DNAT (unless cfg.EndpointMaps, see
// endpointMaps); with affinity each endpoint has a chain recording the client in its
// affinity set, clients found in a set go back to that endpoint, and the others are
// spread at random.
func (r *serviceRenderer) policyChain(name string, eps []*model.Endpoint, proto nft.Proto, affinity bool) {
	n := len(eps)
	// A rule per endpoint (up to 3 statements) or one map; with affinity, first a
	// rule per endpoint recognizing its clients.
	rulesCap, stmtsCap := n+1, 3*n+2
	if affinity {
		rulesCap, stmtsCap = 2*n+1, 4*n+2
	}
	b := ruleBuf{rules: make([]Rule, 0, rulesCap), stmts: make([]nft.Stmt, 0, stmtsCap)}
	var chains []string // with affinity, the endpoint chains
	if affinity {
		chains = make([]string, n)
		for i, ep := range eps {
			set := affinitySetName(&r.sp.Name, ep.AddrPort(), r.sp.StickyMaxAgeSeconds)
			chains[i] = prefixEndpoint + endpointNameBase(&r.sp.Name, ep.AddrPort())
			b.add(nft.Match{Keys: r.cfg.saddr(), Value: nft.SetRef(set)}, nft.Verdict{Kind: nft.Goto, Chain: chains[i]})
		}
	}
	isProto := protoMatch(proto)
	if n <= r.cfg.endpointRulesMax() {
		for i, ep := range eps {
			var pick nft.Stmt
			if i < n-1 {
				pick = numgenPick(n - i)
			}
			switch {
			case affinity && pick != nil:
				b.add(pick, nft.Verdict{Kind: nft.Goto, Chain: chains[i]})
			case affinity:
				b.add(nft.Verdict{Kind: nft.Goto, Chain: chains[i]})
			case pick != nil:
				b.add(pick, isProto, nft.DNAT{To: ep.AddrPort()})
			default:
				b.add(isProto, nft.DNAT{To: ep.AddrPort()})
			}
		}
		r.chain(name, b.rules...)
		return
	}
	key := []nft.Key{nft.Numgen(uint32(n))}
	if affinity {
		elems := make([]nft.VMapElem, n)
		for i, c := range chains {
			elems[i] = nft.VMapElem{Key: uint32(i), Verdict: nft.Verdict{Kind: nft.Goto, Chain: c}}
		}
		b.add(nft.VMap{Keys: key, Elems: elems})
		r.chain(name, b.rules...)
		return
	}
	elems := make([]nft.DNATElem, n)
	for i, ep := range eps {
		elems[i] = nft.DNATElem{Key: uint32(i), To: ep.AddrPort()}
	}
	b.add(isProto, nft.DNATMap{Family: r.cfg.nftFamily(), Keys: key, Elems: elems})
	r.chain(name, b.rules...)
}

// ruleBuf builds rules whose statements share one backing array: a policy chain
// has a rule per endpoint, and one allocation per rule would be most of the
// renderer's (rules are immutable, so sharing is safe).
type ruleBuf struct {
	rules []Rule
	stmts []nft.Stmt
}

func (b *ruleBuf) add(stmts ...nft.Stmt) {
	start := len(b.stmts)
	b.stmts = append(b.stmts, stmts...)
	b.rules = append(b.rules, Rule{Stmts: b.stmts[start:len(b.stmts):len(b.stmts)]})
}

// Statements shared by every policy chain, built once: "numgen random mod N 0"
// for the N up to DefaultEndpointRulesMax, "meta l4proto P" for the protocols.
var (
	numgenPicks = func() []nft.Stmt {
		picks := make([]nft.Stmt, DefaultEndpointRulesMax+1)
		for n := 1; n < len(picks); n++ {
			picks[n] = newNumgenPick(n)
		}
		return picks
	}()
	protoMatches = map[nft.Proto]nft.Stmt{nft.TCP: newProtoMatch(nft.TCP), nft.UDP: newProtoMatch(nft.UDP), nft.SCTP: newProtoMatch(nft.SCTP)}
)

func numgenPick(n int) nft.Stmt {
	if n < len(numgenPicks) {
		return numgenPicks[n]
	}
	return newNumgenPick(n)
}

func newNumgenPick(n int) nft.Stmt {
	return nft.Match{Keys: []nft.Key{nft.Numgen(uint32(n))}, Value: nft.Num(0)}
}

func protoMatch(p nft.Proto) nft.Stmt {
	if m, ok := protoMatches[p]; ok {
		return m
	}
	return newProtoMatch(p)
}

func newProtoMatch(p nft.Proto) nft.Stmt { return nft.Match{Keys: l4protoKey, Value: p} }

// truncateComment keeps a comment within nftables' limit; comments are cosmetic.
func truncateComment(s string) string {
	if len(s) > knftables.CommentLengthMax {
		return s[:knftables.CommentLengthMax]
	}
	return s
}

// sortedEndpoints returns eps ordered by address and port, so that the rendering does
// not depend on the order the model lists endpoints in.
func sortedEndpoints(eps []*model.Endpoint) []*model.Endpoint {
	slices.SortFunc(eps, func(a, b *model.Endpoint) int { return a.AddrPort().Compare(b.AddrPort()) })
	return eps
}
