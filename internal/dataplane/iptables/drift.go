package iptables

import (
	"context"

	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
	"github.com/kproxy/kproxy/internal/drift"
	"github.com/kproxy/kproxy/internal/iptables"
	render "github.com/kproxy/kproxy/internal/render/iptables"
)

// comparison is this proxier's half of drift detection: iptables-save of the
// filter and nat tables, read and parsed with no lock held, then compared under
// the sync lock with p.applied. The renderer writes every rule as iptables-save
// prints it (render.State.ChainRules), so each of kproxy's chains must hold
// exactly its rules, in order; the jumps from the built-in chains must exist; and
// no per-ServicePort chain may be left that nothing renders. Other software's
// chains and rules are not compared. iptables has no generation: every check
// reads.
func (p *Proxier) comparison() *proxycore.DriftComparison[map[iptables.Table]*iptables.SaveTable] {
	return &proxycore.DriftComparison[map[iptables.Table]*iptables.SaveTable]{
		Read: func(ctx context.Context) (map[iptables.Table]*iptables.SaveTable, error) {
			return iptables.SaveTables(ctx, p.cfg.IPT, render.KernelTables()...)
		},
		Compare: func(ctx context.Context, kernel map[iptables.Table]*iptables.SaveTable, r *drift.Report) error {
			if p.applied == nil {
				return proxycore.ErrNothingApplied
			}
			return render.CompareTables(ctx, p.applied, kernel, render.JumpRules(), render.IsServiceChain, r)
		},
	}
}

// Verify compares the kernel's rules with the applied state now (any goroutine);
// a sync holds it up only for the comparison itself, not for iptables-save.
func (p *Proxier) Verify(ctx context.Context) (*drift.Report, error) {
	return proxycore.CompareDrift(ctx, p.core, p.comparison())
}

// RunDriftChecks compares the kernel with the applied state once per
// DriftCheckPeriod and, when they differ, makes the next sync, triggered at once,
// a full one (proxycore.RunDriftChecks). It returns nil when ctx is done.
func (p *Proxier) RunDriftChecks(ctx context.Context, trigger func()) error {
	return proxycore.RunDriftChecks(ctx, p.core, p.comparison(), trigger)
}
