package ipvs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"

	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/drift"
	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/ipvs"
	"github.com/kproxy/kproxy/internal/ipvs/dummy"
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
// nil (a full sync) the kernel is listed instead, by the listing and diff that
// drift detection reports from (diff.go). The sets' entries come first,
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
	unbind := w.bind(prev, d)
	stale := w.servers(prev, d)
	w.unbind(unbind)
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
	script := ipset.Script(ipset.Diff(d.Sets, current))
	if len(script) == 0 {
		return
	}
	w.ops += bytes.Count(script, []byte("\n"))
	if err := w.p.cfg.IPSet.Restore(w.ctx, script); err != nil {
		w.fail(fmt.Errorf("updating the ipsets: %w", err))
	}
}

// bind binds d's addresses to kube-ipvs0 and returns those it must unbind once
// the virtual servers are gone.
func (w *writer) bind(prev, d *render.Desired) (extra []netip.Addr) {
	var have []netip.Addr
	if prev == nil {
		var err error
		if have, err = w.p.listAddresses(); err != nil {
			w.fail(err)
		}
	} else {
		have = prev.Addresses
	}
	missing, extra := addressDiff(have, d.Addresses)
	for _, a := range missing {
		w.ops++
		if err := w.p.cfg.Link.AddAddress(a); err != nil {
			w.fail(fmt.Errorf("binding %s to %s: %w", a, dummy.LinkName, err))
		}
	}
	return extra
}

// unbind removes addresses from kube-ipvs0.
func (w *writer) unbind(extra []netip.Addr) {
	for _, a := range extra {
		w.ops++
		if err := w.p.cfg.Link.DeleteAddress(a); err != nil {
			w.fail(fmt.Errorf("unbinding %s from %s: %w", a, dummy.LinkName, err))
		}
	}
}

// servers adds or updates d's virtual servers and their real servers, and
// returns the keys of the virtual servers of the family that d does not have
// (serverDiff: not those in ExcludeCIDRs).
func (w *writer) servers(prev, d *render.Desired) []ipvs.Key {
	full := prev == nil
	var current map[ipvs.Key]held
	if full {
		var err error
		if current, err = w.p.listServers(w.ctx); err != nil {
			w.fail(err)
			if current == nil {
				return nil
			}
		}
	} else {
		current = heldOf(prev)
	}
	changes, stale := w.p.serverDiff(current, d, w.p.inTermination, full)
	for _, c := range changes {
		k := c.want.VS.Key()
		switch {
		case c.cur == nil:
			w.ops++
			if err := w.p.cfg.IPVS.AddVirtualServer(c.want.VS); err != nil {
				w.fail(fmt.Errorf("adding virtual server %s: %w", k, err))
				continue
			}
		case c.update:
			w.ops++
			if err := w.p.cfg.IPVS.UpdateVirtualServer(c.want.VS); err != nil {
				w.fail(fmt.Errorf("updating virtual server %s: %w", k, err))
			}
		}
		w.reals(k, c.reals)
	}
	return stale
}

// reals repairs the real servers of k that differ: missing ones are added (a
// terminating one whose endpoint came back is deleted first, as upstream),
// extra ones removed through graceful termination, and weights reset.
func (w *writer) reals(k ipvs.Key, changes []realChange) {
	g := w.p.cfg.Graceful
	for _, c := range changes {
		ap := c.rs.AddrPort()
		w.ops++
		var err error
		switch {
		case c.cancel:
			if err = g.Cancel(k, ap); err != nil {
				break
			}
			if err = w.p.cfg.IPVS.AddRealServer(k, c.rs); err != nil {
				err = fmt.Errorf("adding real server %s to %s: %w", ap, k, err)
			}
		case c.change == drift.Missing:
			if err = w.p.cfg.IPVS.AddRealServer(k, c.rs); err != nil {
				err = fmt.Errorf("adding real server %s to %s: %w", ap, k, err)
			}
		case c.change == drift.Changed:
			if err = w.p.cfg.IPVS.UpdateRealServer(k, c.rs); err != nil {
				err = fmt.Errorf("updating real server %s of %s: %w", ap, k, err)
			}
		case g != nil:
			err = g.Delete(k, ap)
		default:
			err = w.p.cfg.IPVS.DeleteRealServer(k, ap)
		}
		switch {
		case err == nil:
		case c.change != drift.Extra:
			w.fail(err)
		case !errors.Is(err, ipvs.ErrNotFound):
			w.fail(fmt.Errorf("removing real server %s of %s: %w", ap, k, err))
		}
	}
}

// deleteServers deletes the virtual servers that no Service renders.
func (w *writer) deleteServers(stale []ipvs.Key) {
	for _, k := range stale {
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
