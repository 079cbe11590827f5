package iptables

import (
	"bytes"
	"context"
	"fmt"
	"slices"

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
func (p *Proxier) comparison() *proxycore.DriftComparison[map[render.Table]*iptables.SaveTable] {
	return &proxycore.DriftComparison[map[render.Table]*iptables.SaveTable]{
		Lock:   &p.syncMu,
		Writes: func() uint64 { return p.writes },
		Read: func(ctx context.Context) (map[render.Table]*iptables.SaveTable, error) {
			out := map[render.Table]*iptables.SaveTable{}
			for _, table := range render.Tables() {
				var buf bytes.Buffer
				if err := p.cfg.IPT.SaveInto(ctx, iptables.Table(table), &buf); err != nil {
					return nil, fmt.Errorf("listing the %s table: %w", table, err)
				}
				save, err := iptables.ParseSave(buf.Bytes())
				if err != nil {
					return nil, fmt.Errorf("reading the %s table: %w", table, err)
				}
				out[table] = save.Table(iptables.Table(table))
			}
			return out, nil
		},
		Compare: func(ctx context.Context, kernel map[render.Table]*iptables.SaveTable, r *drift.Report) error {
			if p.applied == nil {
				return proxycore.ErrNothingApplied
			}
			for _, table := range render.Tables() {
				if err := compareTable(ctx, p.applied, table, kernel[table], r); err != nil {
					return err
				}
			}
			return nil
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
	return proxycore.RunDriftChecks(ctx, p.core, p.comparison(), p.RequestFullSync, trigger)
}

// compareCheckEvery is how many chains compareTable compares between two looks at
// its context: it runs under the sync lock, and a sync that wants the lock cancels
// the comparison (proxycore.Core.LockForSync) instead of waiting for the whole
// table (tens of thousands of chains at 10,000 Services).
const compareCheckEvery = 1024

// compareTable adds to r how the kernel's table (nil when iptables-save printed
// none) differs from what st applied to it. Rules are compared as arguments:
// iptables-save spaces some extensions' output its own way (nfacct prints two
// blanks before its name). It returns ctx's error, with r incomplete, when ctx
// ends first.
func compareTable(ctx context.Context, st *render.State, table render.Table, kernel *iptables.SaveTable, r *drift.Report) error {
	chains, rules := st.ChainRules(table)
	got := map[string][]iptables.SaveRule{}
	declared := map[string]bool{}
	if kernel != nil {
		for _, c := range kernel.Chains {
			declared[string(c.Name)] = true
		}
		// iptables-save prints a chain's rules together: each chain's are a
		// subslice of kernel.Rules, not a copy (a chain seen twice is joined).
		listed := kernel.Rules
		for i := 0; i < len(listed); {
			j := i + 1
			for j < len(listed) && listed[j].Chain == listed[i].Chain {
				j++
			}
			c := string(listed[i].Chain)
			if prev, ok := got[c]; ok {
				got[c] = append(slices.Clip(prev), listed[i:j]...)
			} else {
				got[c] = listed[i:j:j]
			}
			i = j
		}
	}
	rendered := make(map[string]bool, len(chains))
	name := func(chain string) string { return string(table) + " " + chain }
	for i, c := range chains {
		if i%compareCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		rendered[c] = true
		switch {
		case !declared[c]:
			r.Add(drift.Difference{Kind: "chain", Name: name(c), Change: drift.Missing})
		case !slices.EqualFunc(rules[c], got[c], sameRule):
			r.Add(drift.Difference{Kind: "rule", Name: name(c), Change: drift.Changed, Detail: rulesDetail(rules[c], got[c])})
		}
	}
	for c := range declared {
		if render.IsServiceChain(c) && !rendered[c] {
			r.Add(drift.Difference{Kind: "chain", Name: name(c), Change: drift.Extra})
		}
	}
	for _, j := range render.JumpRules() {
		if j.Table != table || !declared[j.Target] && !rendered[j.Target] {
			continue
		}
		if !slices.ContainsFunc(got[j.Chain], func(rule iptables.SaveRule) bool { return jumpsTo(rule.Args, j.Target) }) {
			r.Add(drift.Difference{Kind: "rule", Name: name(j.Chain), Change: drift.Missing, Detail: "the jump to " + j.Target})
		}
	}
	return nil
}

// sameRule reports whether the kernel's rule has the arguments of an applied
// rule's text.
func sameRule(applied string, kernel iptables.SaveRule) bool {
	args, err := iptables.SplitArgs(applied)
	return err == nil && slices.Equal(args, kernel.Args)
}

// jumpsTo reports whether a rule's arguments end in "-j target".
func jumpsTo(args []string, target string) bool {
	n := len(args)
	return n >= 2 && args[n-2] == "-j" && args[n-1] == target
}

// rulesDetail says how two rule lists differ: their lengths and the first rule
// that is not the same, with both texts.
func rulesDetail(want []string, got []iptables.SaveRule) string {
	i := 0
	for i < len(want) && i < len(got) && sameRule(want[i], got[i]) {
		i++
	}
	d := fmt.Sprintf("%d rules applied, %d in the kernel", len(want), len(got))
	switch {
	case i < len(want) && i < len(got):
		d += fmt.Sprintf("; rule %d is %q, applied %q", i+1, got[i].Text, want[i])
	case i < len(want):
		d += fmt.Sprintf("; rule %d on are missing, from %q", i+1, want[i])
	case i < len(got):
		d += fmt.Sprintf("; rule %d on are extra, from %q", i+1, got[i].Text)
	}
	return d
}
