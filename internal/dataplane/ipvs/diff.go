package ipvs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/kproxy/kproxy/internal/drift"
	"github.com/kproxy/kproxy/internal/ipvs"
	"github.com/kproxy/kproxy/internal/ipvs/dummy"
	"github.com/kproxy/kproxy/internal/model"
	render "github.com/kproxy/kproxy/internal/render/ipvs"
)

// What the kernel holds of the mode and how it differs from a desired state:
// one listing and one diff that both the full sync (apply.go), which repairs
// every difference, and drift detection (drift.go), which reports them, read.
// A partial sync diffs what it applied last instead of a listing.

// held is a virtual server as the kernel holds it, with its real servers.
type held struct {
	vs    ipvs.VirtualServer
	reals []ipvs.RealServer
}

// listAddresses lists this family's addresses on kube-ipvs0, sorted. kube-ipvs0 is
// shared by both families' proxiers: each binds, unbinds and compares only its
// own family's (the other's full sync would otherwise unbind them all). The
// error wraps dummy.ErrLinkNotFound when kube-ipvs0 does not exist.
func (p *Proxier) listAddresses() ([]netip.Addr, error) {
	all, err := p.cfg.Link.Addresses()
	if err != nil {
		return nil, fmt.Errorf("listing the addresses of %s: %w", dummy.LinkName, err)
	}
	var have []netip.Addr
	for _, a := range all {
		if model.InFamily(a, p.cfg.Family) {
			have = append(have, a)
		}
	}
	slices.SortFunc(have, netip.Addr.Compare)
	return have, nil
}

// listServers lists this family's virtual servers with their real servers. A
// virtual server whose real servers cannot be listed is left out and its error
// joined to the others: the caller decides whether a partial listing serves.
func (p *Proxier) listServers(ctx context.Context) (map[ipvs.Key]held, error) {
	vss, err := p.cfg.IPVS.VirtualServers()
	if err != nil {
		return nil, fmt.Errorf("listing the IPVS virtual servers: %w", err)
	}
	current := make(map[ipvs.Key]held, len(vss))
	var errs []error
	for _, vs := range vss {
		if !model.InFamily(vs.Address, p.cfg.Family) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return current, errors.Join(append(errs, err)...)
		}
		reals, err := p.cfg.IPVS.RealServers(vs.Key())
		if err != nil {
			errs = append(errs, fmt.Errorf("listing the real servers of %s: %w", vs.Key(), err))
			continue
		}
		current[vs.Key()] = held{vs, reals}
	}
	return current, errors.Join(errs...)
}

// heldOf is what a desired state put in the kernel, as listServers lists it.
func heldOf(d *render.Desired) map[ipvs.Key]held {
	current := make(map[ipvs.Key]held, len(d.Services))
	for _, s := range d.Services {
		current[s.VS.Key()] = held{s.VS, s.Reals}
	}
	return current
}

// addressDiff returns the addresses of want missing from have and those of have
// that want does not bind (both sorted).
func addressDiff(have, want []netip.Addr) (missing, extra []netip.Addr) {
	for _, a := range want {
		if _, found := slices.BinarySearchFunc(have, a, netip.Addr.Compare); !found {
			missing = append(missing, a)
		}
	}
	for _, a := range have {
		if _, found := slices.BinarySearchFunc(want, a, netip.Addr.Compare); !found {
			extra = append(extra, a)
		}
	}
	return missing, extra
}

// serverChange is a desired virtual server that the kernel does not hold as
// desired: missing (cur nil), with other settings (update), or with real servers
// that differ.
type serverChange struct {
	want   *render.Service
	cur    *ipvs.VirtualServer
	update bool
	reals  []realChange
}

// realChange is a real server that differs: Missing (to add), Extra (to remove,
// through graceful termination), or Changed: another weight (to update), or
// terminating while its endpoint is wanted again (cancel: deleted and added
// afresh, as upstream).
type realChange struct {
	change drift.Change
	// rs is the desired real server; for an Extra one, the kernel's.
	rs     ipvs.RealServer
	weight int // the kernel's, for Changed
	cancel bool
}

// terminating reports whether a real server is in graceful termination.
type terminating func(ipvs.Key, netip.AddrPort) bool

// serverDiff returns how current (the kernel's listing, or what was applied)
// differs from d's virtual servers, in d's order, and the keys of the family's
// virtual servers that d does not have, sorted, except those in ExcludeCIDRs
// (upstream's cleanLegacyService deletes any other). Real servers in graceful
// termination that are not wanted are not differences. Weights are compared when
// weights is set (a full sync resets them, as upstream; a partial one leaves
// them: it wrote them).
func (p *Proxier) serverDiff(current map[ipvs.Key]held, d *render.Desired, inTermination terminating, weights bool) (changes []serverChange, stale []ipvs.Key) {
	current = maps.Clone(current)
	for i := range d.Services {
		s := &d.Services[i]
		k := s.VS.Key()
		cur, ok := current[k]
		delete(current, k)
		c := serverChange{want: s}
		if ok {
			c.cur = &cur.vs
			c.update = !sameVirtualServer(cur.vs, s.VS)
		}
		c.reals = realDiff(k, cur.reals, s.Reals, inTermination, weights)
		if !ok || c.update || len(c.reals) > 0 {
			changes = append(changes, c)
		}
	}
	for k := range current {
		if !p.excluded(k.Address) {
			stale = append(stale, k)
		}
	}
	slices.SortFunc(stale, render.CompareKeys)
	return changes, stale
}

// sameVirtualServer compares what kproxy sets of a virtual server; the kernel
// adds FlagHashed to every one it holds.
func sameVirtualServer(a, b ipvs.VirtualServer) bool {
	return a.Scheduler == b.Scheduler && a.Flags&^ipvs.FlagHashed == b.Flags&^ipvs.FlagHashed && a.Timeout == b.Timeout
}

// realDiff returns how the real servers have of k differ from want: wanted
// ones missing or terminating, extra ones not terminating (sorted), and, with
// weights, those of another weight.
func realDiff(k ipvs.Key, have, want []ipvs.RealServer, inTermination terminating, weights bool) []realChange {
	var out []realChange
	extra := make(map[netip.AddrPort]ipvs.RealServer, len(have))
	for _, rs := range have {
		extra[rs.AddrPort()] = rs
	}
	for _, rs := range want {
		ap := rs.AddrPort()
		cur, ok := extra[ap]
		delete(extra, ap)
		switch {
		case inTermination(k, ap):
			out = append(out, realChange{change: drift.Changed, rs: rs, weight: cur.Weight, cancel: true})
		case !ok:
			out = append(out, realChange{change: drift.Missing, rs: rs})
		case weights && cur.Weight != rs.Weight:
			out = append(out, realChange{change: drift.Changed, rs: rs, weight: cur.Weight})
		}
	}
	for _, ap := range slices.SortedFunc(maps.Keys(extra), netip.AddrPort.Compare) {
		if !inTermination(k, ap) {
			out = append(out, realChange{change: drift.Extra, rs: extra[ap]})
		}
	}
	return out
}
