package ipvs

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/kproxy/kproxy/internal/ipvs"
	"github.com/kproxy/kproxy/internal/model"
)

// Kind is what a virtual server stands for.
type Kind uint8

// The kinds of virtual server, one per address a ServicePort is reached on.
const (
	KindClusterIP Kind = iota
	KindExternalIP
	KindLoadBalancer
	KindNodePort
)

func (k Kind) String() string {
	switch k {
	case KindClusterIP:
		return "cluster-ip"
	case KindExternalIP:
		return "external-ip"
	case KindLoadBalancer:
		return "load-balancer"
	case KindNodePort:
		return "node-port"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Service is one virtual server with the real servers it must hold.
type Service struct {
	VS ipvs.VirtualServer
	// Reals are sorted by address and port, all of weight 1 (upstream's).
	// Services of one ServicePort may share the slice: read only.
	Reals []ipvs.RealServer
	// Port and Kind say where it comes from (for logs, explain and metrics).
	Port model.ServicePortName
	Kind Kind
}

// SetEntry is one entry of one set, as `ipset save` prints it.
type SetEntry struct {
	Set   SetID
	Entry string
}

// Fragment is what one ServicePort contributes to the desired state. Fragments
// are never mutated after rendering.
type Fragment struct {
	Name model.ServicePortName
	// Services in the order upstream creates them (ClusterIP, externalIPs, LB
	// VIPs, NodePorts per node address).
	Services []Service
	// Bind are the addresses to put on kube-ipvs0 (and into KUBE-IPVS-IPS).
	Bind []netip.Addr
	// Entries are its entries in the sets other than KUBE-IPVS-IPS.
	Entries []SetEntry
	// NodeBlocked are its LB VIP ports the node itself must not reach: their
	// source ranges do not hold the node IP (KUBE-IPVS-OUT-FILTER).
	NodeBlocked []ipvs.Key
}

// RenderServices renders every view (see RenderService), in order.
func RenderServices(cfg *Config, views []*model.ServicePortView) []*Fragment {
	out := make([]*Fragment, len(views))
	for i, v := range views {
		out[i] = RenderService(cfg, v)
	}
	return out
}

// RenderService renders one ServicePort as upstream v1.37's ipvs proxier programs
// it (syncProxyRules' loop over svcPortMap, syncService and syncEndpoint).
// Endpoints, addresses and source ranges of another family than cfg.Family are
// ignored; a ServicePort whose ClusterIP is not of the family renders nothing.
// cfg must be valid.
func RenderService(cfg *Config, v *model.ServicePortView) *Fragment {
	sp := v.ServicePort
	f := &Fragment{Name: sp.Name}
	if !sp.ClusterIP.IsValid() || !cfg.hasFamily(sp.ClusterIP) {
		return f
	}
	r := serviceRenderer{cfg: cfg, sp: sp, f: f, proto: strings.ToLower(string(sp.Protocol))}
	r.render(v)
	return f
}

type serviceRenderer struct {
	cfg   *Config
	sp    *model.ServicePort
	f     *Fragment
	proto string // lower case, as in set entries
}

func (r *serviceRenderer) entry(set SetID, entry string) {
	r.f.Entries = append(r.f.Entries, SetEntry{Set: set, Entry: entry})
}

// ipPort is a hash:ip,port entry: "10.96.0.10,tcp:53".
func (r *serviceRenderer) ipPort(ip netip.Addr, port int32) string {
	return ip.String() + "," + r.proto + ":" + strconv.Itoa(int(port))
}

func (r *serviceRenderer) service(kind Kind, addr netip.Addr, port int32, reals []ipvs.RealServer) {
	vs := ipvs.VirtualServer{Address: addr, Protocol: r.sp.Protocol, Port: uint16(port), Scheduler: r.cfg.scheduler()}
	if r.sp.SessionAffinity() {
		vs.Flags |= ipvs.FlagPersistent
		vs.Timeout = uint32(r.sp.StickyMaxAgeSeconds)
	}
	if vs.Scheduler == "mh" {
		// Upstream's FlagSourceHash (0x10): IP_VS_SVC_F_SCHED_MH_PORT, the
		// source port is hashed too.
		vs.Flags |= FlagMHPort
	}
	r.f.Services = append(r.f.Services, Service{VS: vs, Reals: reals, Port: r.sp.Name, Kind: kind})
}

// FlagMHPort is the flag upstream sets on every virtual server with the mh
// scheduler (its FlagSourceHash).
const FlagMHPort = ipvs.FlagSchedFlag2

func (r *serviceRenderer) bind(ip netip.Addr) { r.f.Bind = append(r.f.Bind, ip) }

func (r *serviceRenderer) render(v *model.ServicePortView) {
	cfg, sp := r.cfg, r.sp
	clusterEps := r.familyEndpoints(v.ClusterEndpoints)
	localEps := r.familyEndpoints(v.LocalEndpoints)
	rt := model.DecideRouting(sp, v.HasAnyEndpoints, len(clusterEps), len(localEps))

	// Hairpin: a local endpoint reaching itself through the Service is
	// masqueraded (KUBE-LOOP-BACK in KUBE-POSTROUTING).
	for _, ep := range r.familyEndpoints(v.AllReachableEndpoints) {
		if ep.IsLocal {
			r.entry(SetLoopBack, r.ipPort(ep.IP, ep.Port)+","+ep.IP.String())
		}
	}

	internalReals := realServers(&rt, rt.InternalLocal, clusterEps, localEps)
	externalReals := internalReals
	if rt.ExternalLocal != rt.InternalLocal && sp.ExternallyAccessible() {
		externalReals = realServers(&rt, rt.ExternalLocal, clusterEps, localEps)
	}

	// ClusterIP: always a virtual server, endpoints or not: without a real
	// server IPVS itself answers ICMP port unreachable (ip_vs_leave), the
	// other modes' reject.
	r.entry(SetClusterIP, r.ipPort(sp.ClusterIP, sp.Port))
	r.service(KindClusterIP, sp.ClusterIP, sp.Port, internalReals)
	r.bind(sp.ClusterIP)

	for _, ip := range sp.ExternalIPs {
		if !cfg.hasFamily(ip) {
			continue
		}
		set := SetExternalIP // masqueraded
		if sp.ExternalPolicyLocal {
			set = SetExternalIPLocal
		}
		r.entry(set, r.ipPort(ip, sp.Port))
		r.service(KindExternalIP, ip, sp.Port, externalReals)
		if !cfg.isHostAddress(ip) {
			r.bind(ip)
		}
	}

	r.loadBalancers(externalReals)
	r.nodePorts(externalReals)
}

// loadBalancers renders the LB VIPs, with their firewall when the Service has
// source ranges. Upstream applies the ranges to VIP traffic only: traffic from a
// load balancer that sends to the NodePort is not filtered.
func (r *serviceRenderer) loadBalancers(reals []ipvs.RealServer) {
	cfg, sp := r.cfg, r.sp
	var ranges []netip.Prefix
	allowFromNode := false
	for _, p := range sp.LoadBalancerSourceRanges {
		if cfg.hasFamily(p.Addr()) {
			ranges = append(ranges, p.Masked())
			allowFromNode = allowFromNode || cfg.NodeIP.IsValid() && p.Contains(cfg.NodeIP)
		}
	}
	for _, ip := range sp.LoadBalancerVIPs {
		if !cfg.hasFamily(ip) {
			continue
		}
		vipPort := r.ipPort(ip, sp.Port)
		r.entry(SetLoadBalancer, vipPort)
		if sp.ExternalPolicyLocal {
			r.entry(SetLoadBalancerLocal, vipPort)
		}
		if len(ranges) > 0 {
			r.entry(SetLoadBalancerFW, vipPort)
			for _, p := range ranges {
				r.entry(SetLoadBalancerSourceCIDR, vipPort+","+savePrefix(p))
			}
			if allowFromNode {
				// A VIP configured on the node (or routed back to it by the
				// load balancer's backends) makes the node's own traffic to it
				// carry the VIP as source.
				r.entry(SetLoadBalancerSourceIP, vipPort+","+ip.String())
			} else {
				r.f.NodeBlocked = append(r.f.NodeBlocked, ipvs.Key{Address: ip, Protocol: sp.Protocol, Port: uint16(sp.Port)})
			}
		}
		r.service(KindLoadBalancer, ip, sp.Port, reals)
		if !cfg.isHostAddress(ip) {
			r.bind(ip)
		}
	}
}

// nodePorts renders the NodePort (one virtual server per node address, none
// bound to kube-ipvs0) and the health check node port.
func (r *serviceRenderer) nodePorts(reals []ipvs.RealServer) {
	sp := r.sp
	if sp.NodePort != 0 {
		nodeIPs := r.cfg.nodePortIPs()
		if len(nodeIPs) == 0 {
			// As upstream, which "continue"s its loop here: without node
			// addresses the health check node port is left out too.
			return
		}
		all, local, ok := nodePortSets(r.proto)
		if ok {
			var entries []string
			if r.proto == "sctp" {
				// SCTP has no bitmap:port set: hash:ip,port per node address.
				for _, ip := range nodeIPs {
					entries = append(entries, r.ipPort(ip, sp.NodePort))
				}
			} else {
				entries = []string{strconv.Itoa(int(sp.NodePort))}
			}
			for _, e := range entries {
				r.entry(all, e)
				if sp.ExternalPolicyLocal {
					r.entry(local, e)
				}
			}
		}
		for _, ip := range nodeIPs {
			r.service(KindNodePort, ip, sp.NodePort, reals)
		}
	}
	if sp.HealthCheckNodePort != 0 {
		r.entry(SetHealthCheckNodePort, strconv.Itoa(int(sp.HealthCheckNodePort)))
	}
}

func (r *serviceRenderer) familyEndpoints(eps []*model.Endpoint) []*model.Endpoint {
	return model.EndpointsInFamily(eps, r.cfg.Family)
}

// realServers are the real servers of a virtual server whose traffic follows the
// Local policy (local) or the Cluster one, as upstream's syncEndpoint picks them:
// the Local-policy endpoints when there are some, else the Cluster-policy ones.
// Upstream falls back to the Cluster-policy endpoints even for a Local policy
// without local endpoints (kubernetes#97081: so that local pods still reach an
// external IP or LB VIP; external clients get replies from a pod address that
// they discard). That is not the other modes' behaviour (they drop), and it
// bends internalTrafficPolicy Local too when the Service is reachable from
// outside; kproxy does the same as upstream's ipvs mode.
func realServers(rt *model.Routing, local bool, clusterEps, localEps []*model.Endpoint) []ipvs.RealServer {
	var eps []*model.Endpoint
	switch {
	case local && rt.LocalSelection:
		eps = localEps
	case rt.ClusterSelection:
		eps = clusterEps
	}
	reals := make([]ipvs.RealServer, 0, len(eps))
	for _, ep := range eps {
		reals = append(reals, ipvs.RealServer{Address: ep.IP, Port: uint16(ep.Port), Weight: 1})
	}
	// Upstream's set of "ip:port" strings: no duplicates; sorted for a canonical form.
	// (The model sorts endpoints by their text, often the same order.)
	byAddrPort := func(a, b ipvs.RealServer) int { return a.AddrPort().Compare(b.AddrPort()) }
	if !slices.IsSortedFunc(reals, byAddrPort) {
		slices.SortFunc(reals, byAddrPort)
	}
	return slices.CompactFunc(reals, func(a, b ipvs.RealServer) bool { return a.AddrPort() == b.AddrPort() })
}

// savePrefix writes a prefix as `ipset save` does: without the length when it
// is a single address. (Upstream's entries keep the "/32", which its listing of
// the set never shows, so it seems to delete and re-add such entries at every
// sync; the kernel ends up holding the same either way.)
func savePrefix(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}
