package ipvs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
	"github.com/kproxy/kproxy/internal/drift"
	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/ipvs"
	"github.com/kproxy/kproxy/internal/ipvs/dummy"
	ipt "github.com/kproxy/kproxy/internal/render/iptables"
	render "github.com/kproxy/kproxy/internal/render/ipvs"
)

// listing is what a drift comparison reads of the kernel, with no lock held.
type listing struct {
	sets map[string][]string
	// linkMissing: kube-ipvs0 does not exist (addresses is then empty).
	linkMissing bool
	addresses   []netip.Addr
	servers     map[ipvs.Key]held
	tables      map[iptables.Table]*iptables.SaveTable
	// terminating are the real servers in graceful termination before the
	// virtual servers were listed: one that the termination's sweep deletes
	// meanwhile is gone from the listing or still in this set, never taken for
	// an extra one. (One that a sync starts terminating makes the comparison
	// inconclusive: the sync wrote.)
	terminating map[ipvs.Terminating]bool
}

func (l *listing) inTermination(k ipvs.Key, ap netip.AddrPort) bool {
	return l.terminating[ipvs.Terminating{Key: k, RealServer: ap}]
}

// comparison is this proxier's half of drift detection: the family's virtual
// and real servers, kproxy's ipsets, kube-ipvs0's addresses of the family and
// iptables-save of the nat and filter tables, listed with no lock held, then
// compared under the sync lock with what the last sync applied. The differences
// are those a full sync repairs (diff.go: both read the same listing and diff),
// so real servers in graceful termination, virtual servers in ExcludeCIDRs or of
// the other family, sets that are not the mode's, the other family's addresses
// and other software's chains and rules are none. The kernel has no generation
// for IPVS or ipsets: every check lists.
func (p *Proxier) comparison() *proxycore.DriftComparison[*listing] {
	return &proxycore.DriftComparison[*listing]{
		Read: p.list,
		Compare: func(ctx context.Context, kernel *listing, r *drift.Report) error {
			if p.applied == nil {
				return proxycore.ErrNothingApplied
			}
			return p.compare(ctx, kernel, p.applied, r)
		},
	}
}

// Verify compares the kernel with the applied state now (any goroutine); a sync
// holds it up only for the comparison itself, not for the kernel's listing.
func (p *Proxier) Verify(ctx context.Context) (*drift.Report, error) {
	return proxycore.CompareDrift(ctx, p.core, p.comparison())
}

// RunDriftChecks compares the kernel with the applied state once per
// DriftCheckPeriod and, when they differ, makes the next sync, triggered at once,
// a full one (proxycore.RunDriftChecks). It returns nil when ctx is done.
func (p *Proxier) RunDriftChecks(ctx context.Context, trigger func()) error {
	return proxycore.RunDriftChecks(ctx, p.core, p.comparison(), trigger)
}

// list lists what the comparison reads; any failure fails it.
func (p *Proxier) list(ctx context.Context) (*listing, error) {
	l := &listing{terminating: map[ipvs.Terminating]bool{}}
	if g := p.cfg.Graceful; g != nil {
		for _, t := range g.Pending() {
			l.terminating[t] = true
		}
	}
	var err error
	if l.sets, err = p.cfg.IPSet.Save(ctx); err != nil {
		return nil, fmt.Errorf("listing the ipsets: %w", err)
	}
	l.addresses, err = p.listAddresses()
	switch {
	case errors.Is(err, dummy.ErrLinkNotFound):
		l.linkMissing = true
	case err != nil:
		return nil, err
	}
	if l.servers, err = p.listServers(ctx); err != nil {
		return nil, err
	}
	if l.tables, err = iptables.SaveTables(ctx, p.cfg.IPT, ipt.KernelTables()...); err != nil {
		return nil, err
	}
	return l, nil
}

// compare adds to r how the kernel differs from applied: missing sets and sets
// whose entries differ, kube-ipvs0 or its addresses, virtual servers missing,
// extra or with other settings, their real servers, and the mode's chains
// (render/iptables.CompareTables, as the iptables mode compares its own). It
// returns ctx's error, with r incomplete, when ctx ends first.
func (p *Proxier) compare(ctx context.Context, kernel *listing, applied *render.Desired, r *drift.Report) error {
	for _, d := range ipset.Diff(applied.Sets, kernel.sets) {
		r.Add(setDifference(d))
	}
	if kernel.linkMissing {
		r.Add(drift.Difference{Kind: "link", Name: dummy.LinkName, Change: drift.Missing})
	} else {
		missing, extra := addressDiff(kernel.addresses, applied.Addresses)
		for _, a := range missing {
			r.Add(drift.Difference{Kind: "address", Name: dummy.LinkName, Change: drift.Missing, Detail: a.String()})
		}
		for _, a := range extra {
			r.Add(drift.Difference{Kind: "address", Name: dummy.LinkName, Change: drift.Extra, Detail: a.String()})
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	changes, stale := p.serverDiff(kernel.servers, applied, kernel.inTermination, true)
	for _, c := range changes {
		k := c.want.VS.Key()
		switch {
		case c.cur == nil:
			// Its real servers are missing with it: one difference.
			r.Add(drift.Difference{Kind: "virtual server", Name: k.String(), Change: drift.Missing})
			continue
		case c.update:
			r.Add(drift.Difference{Kind: "virtual server", Name: k.String(), Change: drift.Changed, Detail: serverDetail(*c.cur, c.want.VS)})
		}
		for _, rc := range c.reals {
			r.Add(realDifference(k, rc))
		}
	}
	for _, k := range stale {
		r.Add(drift.Difference{Kind: "virtual server", Name: k.String(), Change: drift.Extra})
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return ipt.CompareTables(ctx, ipt.NewState(&applied.Rules, nil), kernel.tables, render.JumpRules(), nil, r)
}

// setDifference is how one of the mode's sets differs: missing, or its entries
// (counted, with the first of each kind).
func setDifference(d ipset.SetDiff) drift.Difference {
	if d.Create {
		return drift.Difference{Kind: "set", Name: d.Set.Name, Change: drift.Missing}
	}
	detail := fmt.Sprintf("%d missing, %d extra of %d", len(d.Absent), len(d.Stale), d.Want)
	if len(d.Absent) > 0 {
		detail += "; missing " + d.Absent[0]
	}
	if len(d.Stale) > 0 {
		detail += "; extra " + d.Stale[0]
	}
	return drift.Difference{Kind: "element", Name: d.Set.Name, Change: drift.Changed, Detail: detail}
}

// serverDetail says which settings of a virtual server differ.
func serverDetail(cur, want ipvs.VirtualServer) string {
	var parts []string
	if cur.Scheduler != want.Scheduler {
		parts = append(parts, fmt.Sprintf("scheduler %s, applied %s", cur.Scheduler, want.Scheduler))
	}
	if c, w := cur.Flags&^ipvs.FlagHashed, want.Flags&^ipvs.FlagHashed; c != w {
		parts = append(parts, fmt.Sprintf("flags %#x, applied %#x", uint32(c), uint32(w)))
	}
	if cur.Timeout != want.Timeout {
		parts = append(parts, fmt.Sprintf("persistence timeout %d s, applied %d s", cur.Timeout, want.Timeout))
	}
	return strings.Join(parts, "; ")
}

// realDifference is one real server of the virtual server k that differs.
func realDifference(k ipvs.Key, c realChange) drift.Difference {
	d := drift.Difference{Kind: "real server", Name: k.String(), Change: c.change, Detail: c.rs.AddrPort().String()}
	switch {
	case c.cancel:
		d.Detail += fmt.Sprintf(": terminating (weight %d), applied weight %d", c.weight, c.rs.Weight)
	case c.change == drift.Changed:
		d.Detail += fmt.Sprintf(": weight %d, applied %d", c.weight, c.rs.Weight)
	case c.change == drift.Extra:
		d.Detail += fmt.Sprintf(" (weight %d)", c.rs.Weight)
	}
	return d
}
