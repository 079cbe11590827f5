package nftnetlink

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kproxy/kproxy/internal/drift"
)

// CompareInventories adds to r every object in which got (the kernel) differs
// from want (what was applied): missing, extra and changed chains, sets, maps and
// counters; for a chain whose rules differ, one difference saying where the
// rules first part; for a set or map, one difference per set counting its missing
// and extra elements. A missing table is one difference.
func CompareInventories(want, got *Inventory, r *drift.Report) {
	if want.Exists && !got.Exists {
		r.Add(drift.Difference{Kind: "table", Change: drift.Missing})
		return
	}
	for _, name := range slices.Sorted(maps.Keys(want.Chains)) {
		w, g := want.Chains[name], got.Chains[name]
		switch {
		case g == nil:
			r.Add(drift.Difference{Kind: "chain", Name: name, Change: drift.Missing})
		case g.Def != w.Def:
			r.Add(drift.Difference{Kind: "chain", Name: name, Change: drift.Changed, Detail: "definition (hook, type, priority, policy or comment)"})
		case !slices.Equal(g.Rules, w.Rules):
			r.Add(drift.Difference{Kind: "rule", Name: name, Change: drift.Changed, Detail: rulesDetail(w.Rules, g.Rules)})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got.Chains)) {
		if want.Chains[name] == nil {
			r.Add(drift.Difference{Kind: "chain", Name: name, Change: drift.Extra})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want.Sets)) {
		w, g := want.Sets[name], got.Sets[name]
		kind := setKind(w)
		switch {
		case g == nil:
			r.Add(drift.Difference{Kind: kind, Name: name, Change: drift.Missing})
		case g.Def != w.Def || g.Map != w.Map:
			r.Add(drift.Difference{Kind: kind, Name: name, Change: drift.Changed, Detail: "definition (type, flags, timeout or comment)"})
		case !w.Dynamic:
			missing, extra, changed := 0, 0, 0
			for k, e := range w.Elements {
				switch ge, ok := g.Elements[k]; {
				case !ok:
					missing++
				case ge != e:
					changed++
				}
			}
			for k := range g.Elements {
				if _, ok := w.Elements[k]; !ok {
					extra++
				}
			}
			if missing+extra+changed > 0 {
				detail := fmt.Sprintf("%d missing, %d extra of %d", missing, extra, len(w.Elements))
				if changed > 0 {
					detail = fmt.Sprintf("%d missing, %d extra, %d with another value, of %d", missing, extra, changed, len(w.Elements))
				}
				r.Add(drift.Difference{Kind: "element", Name: name, Change: drift.Changed, Detail: detail})
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got.Sets)) {
		if want.Sets[name] == nil {
			r.Add(drift.Difference{Kind: setKind(got.Sets[name]), Name: name, Change: drift.Extra})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want.Counters)) {
		if !got.Counters[name] {
			r.Add(drift.Difference{Kind: "counter", Name: name, Change: drift.Missing})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got.Counters)) {
		if !want.Counters[name] {
			r.Add(drift.Difference{Kind: "counter", Name: name, Change: drift.Extra})
		}
	}
}

func setKind(s *InventorySet) string {
	if s.Map {
		return "map"
	}
	return "set"
}

// rulesDetail says how two rule lists differ: their lengths and the first rule
// (1-based) that is not the same.
func rulesDetail(want, got []uint64) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d rules applied, %d in the kernel", len(want), len(got))
	if i < len(want) || i < len(got) {
		fmt.Fprintf(&b, "; they differ from rule %d on", i+1)
	}
	return b.String()
}
