package nftables

import (
	"crypto/sha256"
	"fmt"
	"net/netip"

	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/nft"
)

// Endpoint selection without session affinity goes through shared data maps, so that
// replacing an endpoint changes map elements only (see doc.go, "Choices for scale"):
//
//	dnat ip addr . port to ip daddr . tcp dport . numgen random mod N map @service-endpoints-tcp-SS
//	dnat ip addr . port to tcp dport . numgen random mod N map @service-nodeport-endpoints-tcp-SS
//
// Each policy chain holds these one or two rules; the maps hold, for every frontend
// that can reach the chain (ClusterIP, external IP or LB VIP . port; for the second
// map the NodePort) and every slot 0..N-1, the endpoint address and port. A lookup
// that finds nothing ends the rule, so NodePort traffic (whose destination is a node
// address) falls through to the second rule. "tcp dport" makes nft match the
// protocol first, as "meta l4proto tcp" did in rules per endpoint; the maps are per
// protocol because nft 1.0.6 cannot add a rule using an existing map whose typeof
// has "th dport" in its data.
//
// The kernel looks sets up by name in a list, validates every element added to a map
// against every rule bound to it, and walks a map's elements for every rule that
// binds it: one map per ServicePort makes a full sync quadratic in the number of
// sets, one map for all quadratic in the number of rules. ServicePorts are therefore
// spread over endpointMapShards maps per kind and protocol by a hash of their name;
// a map exists while a ServicePort uses it.
const endpointMapShards = 256

// Kinds of endpoint maps: Cluster or Local policy endpoints, keyed by destination
// address and port or (NodePorts) by port only. Names end in "<protocol>-<shard>".
const (
	prefixClusterEndpoints         = "service-endpoints-"
	prefixLocalEndpoints           = "local-endpoints-"
	prefixClusterNodePortEndpoints = "service-nodeport-endpoints-"
	prefixLocalNodePortEndpoints   = "local-nodeport-endpoints-"
)

// endpointShard is the shard of a ServicePort's endpoint maps, as two hex digits.
func endpointShard(name *model.ServicePortName) string {
	sum := sha256.Sum256([]byte(name.String()))
	return fmt.Sprintf("%02x", int(sum[0])%endpointMapShards)
}

// frontends are the keys through which packets reach one policy chain: "addr .
// port" of the ClusterIP, external IPs and LB VIPs, and the NodePort (0: none).
type frontends struct {
	addrs    []netip.AddrPort
	nodePort uint16
}

// endpointMaps renders the endpoint selection of a policy chain without session
// affinity: its rules, its maps and their elements.
func (r *serviceRenderer) endpointMaps(chain string, local bool, proto string, nproto nft.Proto, fe frontends, eps []*model.Endpoint) {
	suffix := proto + "-" + endpointShard(&r.sp.Name)
	addrMap, portMap := prefixClusterEndpoints+suffix, prefixClusterNodePortEndpoints+suffix
	if local {
		addrMap, portMap = prefixLocalEndpoints+suffix, prefixLocalNodePortEndpoints+suffix
	}
	dportKey, _ := nft.Dport(nproto)
	types := r.cfg.setTypes()
	slot := nft.Numgen(uint32(len(eps)))
	var rules []Rule
	if len(fe.addrs) > 0 || fe.nodePort == 0 {
		r.f.Containers = append(r.f.Containers, Container{Name: addrMap, IsMap: true, Type: types.endpoints[nproto]})
		rules = append(rules, rule(nft.DNATMap{Family: r.cfg.nftFamily(), Keys: []nft.Key{nft.Daddr(r.cfg.nftFamily()), dportKey, slot}, Map: addrMap}))
	}
	if fe.nodePort != 0 {
		r.f.Containers = append(r.f.Containers, Container{Name: portMap, IsMap: true, Type: types.nodePortEndpoints[nproto]})
		rules = append(rules, rule(nft.DNATMap{Family: r.cfg.nftFamily(), Keys: []nft.Key{dportKey, slot}, Map: portMap}))
	}
	for i, ep := range eps {
		target := r.elem().Addr(ep.IP).Num(uint32(ep.Port)).Elem()
		for _, fa := range fe.addrs {
			r.element(addrMap, r.elem().Addr(fa.Addr()).Num(uint32(fa.Port())).Num(uint32(i)).Elem(), target, false)
		}
		if fe.nodePort != 0 {
			r.element(portMap, r.elem().Num(uint32(fe.nodePort)).Num(uint32(i)).Elem(), target, false)
		}
	}
	r.chain(chain, rules...)
}
