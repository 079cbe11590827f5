package ipvstrace

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/ipvs"
	"github.com/kproxy/kproxy/internal/trace/ipttrace"
)

// Service is one virtual server with its real servers, as the kernel lists them.
type Service struct {
	VS    ipvs.VirtualServer
	Reals []ipvs.RealServer
}

// Template is one persistence template of the kernel's IPVS connection table: a
// client of a persistent virtual server and the real server it sticks to.
type Template struct {
	Client netip.Addr
	VS     ipvs.Key
	Real   netip.AddrPort
}

// IPVS is what the kernel's IPVS holds for one family.
type IPVS struct {
	// Services are the virtual servers with their real servers (those of the
	// other family are ignored).
	Services []Service
	// Templates are the persistence templates (session affinity's memory).
	Templates []Template
	// NoConntrack: net.ipv4.vs.conntrack is 0 (kube-proxy sets it to 1), so
	// IPVS's packets leave conntrack (ip_vs_notrack) and nat does not see them.
	NoConntrack bool
}

// State is what ipvs mode's packet path depends on, for one family.
type State struct {
	// Save is iptables-save of the family (filter and nat at least).
	Save []byte
	// Sets are the ipsets (ipset save), both families' (a rule sees only its
	// family's).
	Sets []ipset.SavedSet
	IPVS
	// Local are the node's addresses, kube-ipvs0's included.
	Local []netip.Addr
	// Bridged are the bridges whose bridged packets iptables sees
	// (br_netfilter), for -m physdev.
	Bridged []string
}

// New returns the evaluator of the ipvs mode's packet path for one family.
func New(st *State, v6 bool) (*ipttrace.Tracer, error) {
	tr, err := ipttrace.New(st.Save, v6, st.Local)
	if err != nil {
		return nil, err
	}
	if tr, err = tr.WithSets(st.Sets); err != nil {
		return nil, err
	}
	b, err := NewBalancer(&st.IPVS, v6)
	if err != nil {
		return nil, err
	}
	return tr.WithBalancer(b).WithBridged(st.Bridged...), nil
}

// Balancer is IPVS's scheduling of new connections over the kernel's virtual
// servers of one family (ipttrace.Balancer).
type Balancer struct {
	services    map[ipvs.Key]*Service
	templates   map[templateKey]netip.AddrPort
	noConntrack bool
}

type templateKey struct {
	client netip.Addr
	vs     ipvs.Key
}

var _ ipttrace.Balancer = (*Balancer)(nil)

// NewBalancer indexes the virtual servers and templates of the family; those of
// the other family are left out. Two virtual servers with one key are an error
// (the kernel holds one).
func NewBalancer(st *IPVS, v6 bool) (*Balancer, error) {
	b := &Balancer{services: map[ipvs.Key]*Service{}, templates: map[templateKey]netip.AddrPort{}, noConntrack: st.NoConntrack}
	for i := range st.Services {
		s := &st.Services[i]
		if s.VS.Address.Unmap().Is6() != v6 {
			continue
		}
		k := s.VS.Key()
		k.Address = k.Address.Unmap()
		if _, dup := b.services[k]; dup {
			return nil, fmt.Errorf("virtual server %s listed twice", k)
		}
		b.services[k] = s
	}
	for _, t := range st.Templates {
		if t.Client.Unmap().Is6() == v6 {
			b.templates[templateKey{t.Client.Unmap(), t.VS}] = t.Real
		}
	}
	return b, nil
}

// ipvsProtocols are the protocols IPVS schedules (those it has a handler for, as
// kproxy's virtual servers use them).
var ipvsProtocols = map[uint8]v1.Protocol{6: v1.ProtocolTCP, 17: v1.ProtocolUDP, 132: v1.ProtocolSCTP}

// Balance implements ipttrace.Balancer as ip_vs_in does for a connection's first
// packet: the virtual server of the packet's protocol, destination address and
// port (or the address's port-0 catch-all), then the scheduler's choice among its
// real servers of weight > 0, or, with none, ICMP port unreachable and a drop.
func (b *Balancer) Balance(c ipttrace.Conn) (ipttrace.Balancing, error) {
	proto, ok := ipvsProtocols[c.Proto]
	if !ok {
		return ipttrace.Balancing{}, nil
	}
	k := ipvs.Key{Address: c.Dst, Protocol: proto, Port: c.DPort}
	s := b.services[k]
	if s == nil {
		k.Port = 0
		if s = b.services[k]; s == nil {
			return ipttrace.Balancing{}, nil
		}
	}
	if c.CTState != "new" && c.CTState != "untracked" {
		return ipttrace.Balancing{}, errors.New("the packet of an existing connection follows IPVS's connection table, which is not modelled (trace new connections)")
	}
	vs := &s.VS
	out := ipttrace.Balancing{Taken: true, Untracked: b.noConntrack}
	out.Notes = append(out.Notes, fmt.Sprintf("virtual server %s, scheduler %s, %d real server(s)", vs.Key(), vs.Scheduler, len(s.Reals)))
	var usable []ipvs.RealServer
	for _, rs := range s.Reals {
		if rs.Weight > 0 {
			usable = append(usable, rs)
		} else {
			out.Notes = append(out.Notes, fmt.Sprintf("real server %s has weight %d: never scheduled (terminating)", rs.AddrPort(), rs.Weight))
		}
	}
	if vs.Flags&ipvs.FlagPersistent != 0 {
		if sticky, ok := b.templates[templateKey{c.Src, vs.Key()}]; ok {
			for _, rs := range usable {
				if rs.AddrPort() == sticky {
					out.Notes = append(out.Notes, fmt.Sprintf("persistent %d s: the client's template sends it to %s", vs.Timeout, sticky))
					out.Targets = []ipttrace.Target{{AddrPort: sticky, Share: 1}}
					return out, nil
				}
			}
			// kube-proxy sets expire_quiescent_template: a template to a real
			// server gone or of weight 0 expires, and the client is scheduled anew.
			out.Notes = append(out.Notes, fmt.Sprintf("persistent %d s: the client's template to %s expires (real server gone or of weight 0)", vs.Timeout, sticky))
		} else {
			out.Notes = append(out.Notes, fmt.Sprintf("persistent %d s: no template for the client yet; the real server chosen now becomes its template", vs.Timeout))
		}
	}
	if len(usable) == 0 {
		out.Notes = append(out.Notes, "no real server of weight > 0: IPVS answers ICMP port unreachable (rate-limited) and drops the packet (ip_vs_leave)")
		return out, nil
	}
	out.Targets = shares(vs.Scheduler, usable)
	if len(usable) > 1 {
		switch vs.Scheduler {
		case "rr":
			out.Notes = append(out.Notes, "rr: each real server of weight > 0 in turn: equal shares")
		case "wrr":
			out.Notes = append(out.Notes, "wrr: shares by weight")
		default:
			out.Notes = append(out.Notes, vs.Scheduler+": the choice depends on state the trace does not see (connection counts, hashes): shown as equal shares")
		}
	}
	return out, nil
}

// shares are the real servers' shares: by weight for wrr, equal otherwise (rr
// ignores weights but 0), in address order.
func shares(scheduler string, usable []ipvs.RealServer) []ipttrace.Target {
	sort.Slice(usable, func(i, j int) bool { return usable[i].AddrPort().Compare(usable[j].AddrPort()) < 0 })
	total := 0
	for _, rs := range usable {
		total += rs.Weight
	}
	out := make([]ipttrace.Target, len(usable))
	for i, rs := range usable {
		share := 1 / float64(len(usable))
		if scheduler == "wrr" {
			share = float64(rs.Weight) / float64(total)
		}
		out[i] = ipttrace.Target{AddrPort: rs.AddrPort(), Share: share}
	}
	return out
}
