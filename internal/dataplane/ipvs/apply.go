package ipvs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/ipvs"
	"github.com/kproxy/kproxy/internal/ipvs/dummy"
	"github.com/kproxy/kproxy/internal/model"
	render "github.com/kproxy/kproxy/internal/render/ipvs"
)

// writer makes the kernel match one desired state. A failing call is recorded
// and the others still run, so that one object the kernel refuses does not keep
// every other Service from being programmed.
type writer struct {
	p    *Proxier
	ctx  context.Context
	ops  int
	errs []error
}

func (w *writer) fail(err error) { w.errs = append(w.errs, err) }

func (w *writer) err() error { return errors.Join(w.errs...) }

// apply writes what differs between prev, what the kernel holds, and d; with prev
// nil (a full sync) the kernel is listed instead. The sets' entries come first,
// then the iptables rules that match on them, and only then the addresses and the
// virtual servers that make IPVS take a Service's traffic; a virtual server comes
// before its real servers, and addresses and virtual servers are removed last.
// Upstream writes the iptables rules after the virtual servers: a new Service's
// first connections are then forwarded before the rules that masquerade them
// exist (a NodePort's or LB IP's without SNAT, a pod's own hairpin connection
// without the KUBE-LOOP-BACK masquerade, which then hangs). Under the VM's
// emulated CPU, where a sync takes over a second, the e2e suite saw those
// connections (docs/ipvs.md); the end state is the same.
func (w *writer) apply(prev, d *render.Desired) {
	if err := w.p.cfg.Link.EnsureLink(); err != nil {
		w.fail(fmt.Errorf("creating %s: %w", dummy.LinkName, err))
		return
	}
	w.sets(prev, d)
	w.rules(prev, d)
	bound := w.bind(prev, d)
	stale := w.servers(prev, d)
	w.unbind(bound, d)
	w.deleteServers(stale)
}

// sets makes every set of the mode hold exactly d's entries with one `ipset
// restore` of the difference.
func (w *writer) sets(prev, d *render.Desired) {
	var current map[string][]string
	if prev == nil {
		cur, err := w.p.cfg.IPSet.Save(w.ctx)
		if err != nil {
			w.fail(fmt.Errorf("listing the ipsets: %w", err))
			return
		}
		current = cur
	} else {
		current = make(map[string][]string, len(prev.Sets))
		for _, c := range prev.Sets {
			current[c.Set.Name] = c.Entries
		}
	}
	script := ipset.Plan(d.Sets, current)
	if len(script) == 0 {
		return
	}
	w.ops += bytes.Count(script, []byte("\n"))
	if err := w.p.cfg.IPSet.Restore(w.ctx, script); err != nil {
		w.fail(fmt.Errorf("updating the ipsets: %w", err))
	}
}

// bind binds d's addresses to kube-ipvs0 and returns those bound before.
func (w *writer) bind(prev, d *render.Desired) []netip.Addr {
	var have []netip.Addr
	if prev == nil {
		all, err := w.p.cfg.Link.Addresses()
		if err != nil {
			w.fail(fmt.Errorf("listing the addresses of %s: %w", dummy.LinkName, err))
		}
		// kube-ipvs0 is shared by both families' proxiers: each binds and
		// unbinds only its own family's addresses (the other's full sync
		// would otherwise unbind them all).
		for _, a := range all {
			if model.InFamily(a, w.p.cfg.Family) {
				have = append(have, a)
			}
		}
		slices.SortFunc(have, netip.Addr.Compare)
	} else {
		have = prev.Addresses
	}
	for _, a := range d.Addresses {
		if _, found := slices.BinarySearchFunc(have, a, netip.Addr.Compare); found {
			continue
		}
		w.ops++
		if err := w.p.cfg.Link.AddAddress(a); err != nil {
			w.fail(fmt.Errorf("binding %s to %s: %w", a, dummy.LinkName, err))
		}
	}
	return have
}

// unbind removes from kube-ipvs0 the addresses in have that d does not bind.
func (w *writer) unbind(have []netip.Addr, d *render.Desired) {
	for _, a := range have {
		if _, found := slices.BinarySearchFunc(d.Addresses, a, netip.Addr.Compare); found {
			continue
		}
		w.ops++
		if err := w.p.cfg.Link.DeleteAddress(a); err != nil {
			w.fail(fmt.Errorf("unbinding %s from %s: %w", a, dummy.LinkName, err))
		}
	}
}

// held is a virtual server as the kernel holds it, with its real servers.
type held struct {
	vs    ipvs.VirtualServer
	reals []ipvs.RealServer
}

// servers adds or updates d's virtual servers and their real servers, and
// returns the keys of the virtual servers of the family that d does not have.
func (w *writer) servers(prev, d *render.Desired) []ipvs.Key {
	current := map[ipvs.Key]held{}
	full := prev == nil
	if full {
		vss, err := w.p.cfg.IPVS.VirtualServers()
		if err != nil {
			w.fail(fmt.Errorf("listing the IPVS virtual servers: %w", err))
			return nil
		}
		for _, vs := range vss {
			if !model.InFamily(vs.Address, w.p.cfg.Family) {
				continue
			}
			reals, err := w.p.cfg.IPVS.RealServers(vs.Key())
			if err != nil {
				w.fail(fmt.Errorf("listing the real servers of %s: %w", vs.Key(), err))
				continue
			}
			current[vs.Key()] = held{vs, reals}
		}
	} else {
		for _, s := range prev.Services {
			current[s.VS.Key()] = held{s.VS, s.Reals}
		}
	}
	for i := range d.Services {
		s := &d.Services[i]
		k := s.VS.Key()
		cur, ok := current[k]
		delete(current, k)
		switch {
		case !ok:
			w.ops++
			if err := w.p.cfg.IPVS.AddVirtualServer(s.VS); err != nil {
				w.fail(fmt.Errorf("adding virtual server %s: %w", k, err))
				continue
			}
		case !sameVirtualServer(cur.vs, s.VS):
			w.ops++
			if err := w.p.cfg.IPVS.UpdateVirtualServer(s.VS); err != nil {
				w.fail(fmt.Errorf("updating virtual server %s: %w", k, err))
			}
		}
		w.reals(k, cur.reals, s.Reals, full)
	}
	return slices.SortedFunc(maps.Keys(current), render.CompareKeys)
}

// sameVirtualServer compares what kproxy sets of a virtual server; the kernel
// adds FlagHashed to every one it holds.
func sameVirtualServer(a, b ipvs.VirtualServer) bool {
	return a.Scheduler == b.Scheduler && a.Flags&^ipvs.FlagHashed == b.Flags&^ipvs.FlagHashed && a.Timeout == b.Timeout
}

// reals makes the real servers of k want, from have: missing ones are added
// (a terminating one whose endpoint came back is deleted first, as upstream),
// extra ones removed through graceful termination, and on a full sync the
// weights reset.
func (w *writer) reals(k ipvs.Key, have, want []ipvs.RealServer, full bool) {
	g := w.p.cfg.Graceful
	extra := make(map[netip.AddrPort]ipvs.RealServer, len(have))
	for _, rs := range have {
		extra[rs.AddrPort()] = rs
	}
	for _, rs := range want {
		ap := rs.AddrPort()
		cur, ok := extra[ap]
		delete(extra, ap)
		if g != nil && g.InTerminationList(k, ap) {
			w.ops++
			if err := g.Cancel(k, ap); err != nil {
				w.fail(err)
				continue
			}
			ok = false
		}
		switch {
		case !ok:
			w.ops++
			if err := w.p.cfg.IPVS.AddRealServer(k, rs); err != nil {
				w.fail(fmt.Errorf("adding real server %s to %s: %w", ap, k, err))
			}
		case full && cur.Weight != rs.Weight:
			w.ops++
			if err := w.p.cfg.IPVS.UpdateRealServer(k, rs); err != nil {
				w.fail(fmt.Errorf("updating real server %s of %s: %w", ap, k, err))
			}
		}
	}
	for _, ap := range slices.SortedFunc(maps.Keys(extra), netip.AddrPort.Compare) {
		if g != nil && g.InTerminationList(k, ap) {
			continue
		}
		w.ops++
		var err error
		if g != nil {
			err = g.Delete(k, ap)
		} else {
			err = w.p.cfg.IPVS.DeleteRealServer(k, ap)
		}
		if err != nil && !errors.Is(err, ipvs.ErrNotFound) {
			w.fail(fmt.Errorf("removing real server %s of %s: %w", ap, k, err))
		}
	}
}

// deleteServers deletes the virtual servers that no Service renders, except in
// ExcludeCIDRs (upstream's cleanLegacyService, which deletes any of the family).
func (w *writer) deleteServers(stale []ipvs.Key) {
	for _, k := range stale {
		if w.p.excluded(k.Address) {
			continue
		}
		w.ops++
		if err := w.p.cfg.IPVS.DeleteVirtualServer(k); err != nil && !errors.Is(err, ipvs.ErrNotFound) {
			w.fail(fmt.Errorf("deleting virtual server %s: %w", k, err))
		}
	}
}

// rules writes the mode's chains when their text changed or on a full sync,
// which first ensures the jumps from the built-in chains (iptables-restore cannot
// add to a built-in chain without flushing it).
func (w *writer) rules(prev, d *render.Desired) {
	p := w.p
	p.buf.Reset()
	d.WriteRules(&p.buf)
	if prev != nil && bytes.Equal(p.buf.Bytes(), p.rules) {
		return
	}
	if prev == nil {
		for _, j := range render.JumpRules() {
			if err := iptables.EnsureJump(w.ctx, p.cfg.IPT, iptables.Table(j.Table), iptables.Chain(j.Chain), iptables.Chain(j.Target), j.Args); err != nil {
				w.fail(err)
			}
		}
	}
	w.ops++
	p.rules = nil
	if err := p.cfg.IPT.Restore(w.ctx, p.buf.Bytes()); err != nil {
		var re *iptables.RestoreError
		if errors.As(err, &re) && re.Line > 0 {
			klog.FromContext(w.ctx).Error(err, "iptables-restore failed", "lines", iptables.Lines(p.buf.Bytes(), re.Line, 3, 3))
		}
		p.cfg.Metrics.IncIPTablesRestoreFailures()
		w.fail(fmt.Errorf("%w (%d bytes): %w", errRestore, p.buf.Len(), err))
		return
	}
	p.rules = bytes.Clone(p.buf.Bytes())
}
