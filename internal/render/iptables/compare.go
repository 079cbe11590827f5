package iptables

import (
	"context"
	"fmt"
	"slices"

	"github.com/kproxy/kproxy/internal/drift"
	"github.com/kproxy/kproxy/internal/iptables"
)

// compareCheckEvery is how many chains CompareTables compares between two looks at
// its context: it runs under a proxier's sync lock, and a sync that wants the lock
// cancels the comparison (proxycore.Core.LockForSync) instead of waiting for the
// whole table (tens of thousands of chains at 10,000 Services).
const compareCheckEvery = 1024

// Owned says which chains a mode owns although st may not render them: a kernel
// chain so named that st does not render is reported extra (IsServiceChain for the
// iptables mode's per-ServicePort chains). nil owns none beyond st's.
type Owned func(chain string) bool

// KernelTables are Tables as internal/iptables names them: what a drift
// comparison lists (iptables.SaveTables) for CompareTables.
func KernelTables() []iptables.Table {
	out := make([]iptables.Table, len(tables))
	for i, t := range tables {
		out[i] = iptables.Table(t)
	}
	return out
}

// CompareTables adds to r how the kernel's tables (as iptables.SaveTables read
// KernelTables; one missing from kernel is empty) differ from what st applied to
// them, for drift detection (internal/drift) in the iptables and ipvs modes:
// each chain st renders must hold exactly its rules, in order (the renderers
// write every rule as iptables-save prints it);
// the jumps of table from the built-in chains to a chain that exists or is
// rendered must be there; and no chain owned may be left that st does not
// render. Other software's chains and rules are not compared. Rules are compared
// as arguments: iptables-save spaces some extensions' output its own way (nfacct
// prints two blanks before its name). It returns ctx's error, with r incomplete,
// when ctx ends first.
func CompareTables(ctx context.Context, st *State, kernel map[iptables.Table]*iptables.SaveTable, jumps []Jump, owned Owned, r *drift.Report) error {
	for _, table := range tables {
		if err := compareTable(ctx, st, table, kernel[iptables.Table(table)], jumps, owned, r); err != nil {
			return err
		}
	}
	return nil
}

// compareTable is CompareTables for one table (kernel nil when iptables-save
// printed none).
func compareTable(ctx context.Context, st *State, table Table, kernel *iptables.SaveTable, jumps []Jump, owned Owned, r *drift.Report) error {
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
	if owned != nil {
		for c := range declared {
			if owned(c) && !rendered[c] {
				r.Add(drift.Difference{Kind: "chain", Name: name(c), Change: drift.Extra})
			}
		}
	}
	for _, j := range jumps {
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
