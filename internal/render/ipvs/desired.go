package ipvs

import (
	"bytes"
	"cmp"
	"net/netip"
	"slices"
	"strings"

	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/ipvs"
	"github.com/kproxy/kproxy/internal/model"
	ipt "github.com/kproxy/kproxy/internal/render/iptables"
)

// Desired is the whole kernel state of the ipvs mode for one family, as upstream's
// syncProxyRules leaves it after a sync.
type Desired struct {
	// Addresses are the addresses to bind on kube-ipvs0, sorted.
	Addresses []netip.Addr
	// Services are the virtual servers with their real servers, sorted by key
	// (CompareKeys), one per key.
	Services []Service
	// Sets are every set of the mode (Sets' order), each with its entries sorted.
	Sets []ipset.Contents
	// Rules are the mode's chains in filter and nat, whole: upstream declares
	// (flushes) and rewrites them at every sync with iptables-restore --noflush.
	// WriteRules writes that input; the jumps from the built-in chains are
	// JumpRules.
	Rules ipt.Fragment
}

// Render renders the desired state of every view: Assemble(cfg,
// RenderServices(cfg, views)). cfg must be valid.
func Render(cfg *Config, views []*model.ServicePortView) *Desired {
	return Assemble(cfg, RenderServices(cfg, views))
}

// Assemble merges the fragments of every ServicePort (in any order; nil ones are
// skipped) into the desired state. A proxier that keeps the fragments of the
// ServicePorts that did not change re-renders only those that did and assembles
// again. When two ServicePorts claim one virtual server (an externalIP, LB VIP or
// node address shared with another Service on the same port), the one with the
// smaller name wins; upstream programs both in turn in map order, so the last one
// synced wins there.
func Assemble(cfg *Config, frags []*Fragment) *Desired {
	d := &Desired{}
	var nServices, nBind int
	var nEntries [numSets]int
	for _, f := range frags {
		if f == nil {
			continue
		}
		nServices += len(f.Services)
		nBind += len(f.Bind)
		for _, e := range f.Entries {
			nEntries[e.Set]++
		}
	}

	// Sorted through pointers into the fragments: a Service is large to swap.
	services := make([]*Service, 0, nServices)
	d.Addresses = make([]netip.Addr, 0, nBind)
	entries := make([][]string, numSets)
	for id := range numSets {
		entries[id] = make([]string, 0, nEntries[id])
	}
	var blocked []ipvs.Key
	for _, f := range frags {
		if f == nil {
			continue
		}
		for i := range f.Services {
			services = append(services, &f.Services[i])
		}
		d.Addresses = append(d.Addresses, f.Bind...)
		for _, e := range f.Entries {
			entries[e.Set] = append(entries[e.Set], e.Entry)
		}
		blocked = append(blocked, f.NodeBlocked...)
	}

	slices.SortFunc(services, func(a, b *Service) int {
		return cmp.Or(CompareKeys(a.VS.Key(), b.VS.Key()), model.CompareServicePortNames(a.Port, b.Port))
	})
	d.Services = make([]Service, 0, len(services))
	for i, s := range services {
		if i > 0 && s.VS.Key() == services[i-1].VS.Key() {
			continue // claimed by a smaller name too
		}
		d.Services = append(d.Services, *s)
	}
	slices.SortFunc(d.Addresses, netip.Addr.Compare)
	d.Addresses = slices.Compact(d.Addresses)
	slices.SortFunc(blocked, CompareKeys)
	blocked = slices.Compact(blocked)

	// KUBE-IPVS-IPS holds exactly the addresses bound on kube-ipvs0.
	entries[SetIPVSAddresses] = make([]string, len(d.Addresses))
	for i, a := range d.Addresses {
		entries[SetIPVSAddresses][i] = a.String()
	}
	var nonEmpty [numSets]bool
	d.Sets = make([]ipset.Contents, numSets)
	for id := range numSets {
		es := entries[id]
		if id != SetIPVSAddresses {
			slices.Sort(es)
			es = slices.Compact(es)
		}
		nonEmpty[id] = len(es) > 0
		d.Sets[id] = ipset.Contents{Set: Set(id, cfg.Family), Entries: es}
	}
	d.Rules = renderRules(cfg, &nonEmpty, blocked)
	return d
}

// CompareKeys orders virtual servers by address, protocol and port.
func CompareKeys(a, b ipvs.Key) int {
	return cmp.Or(a.Address.Compare(b.Address), strings.Compare(string(a.Protocol), string(b.Protocol)), cmp.Compare(a.Port, b.Port))
}

// WriteRules writes into buf the iptables-restore input (for --noflush) of
// d.Rules, as upstream's sync writes it: both tables, every chain of the mode
// declared (created or flushed) and rewritten whole. Other chains are untouched.
func (d *Desired) WriteRules(buf *bytes.Buffer) ipt.Written {
	return ipt.WriteFull(buf, ipt.NewState(&d.Rules, nil), nil)
}

// Set returns the contents of set id.
func (d *Desired) Set(id SetID) *ipset.Contents { return &d.Sets[id] }
