package nftnetlink

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kproxy/kproxy/internal/drift"
)

// compareCheckEvery is how many objects (chains, sets, elements) CompareInventories
// compares between looks at its context: at 10,000 Services a comparison visits
// about 200,000, so a sync waiting for the lock it runs under waits well under a
// millisecond for it to give way.
const compareCheckEvery = 4096

// CompareInventories adds to r every object in which got (the kernel) differs
// from want (what was applied): missing, extra and changed chains, sets, maps and
// counters; for a chain whose rules differ, one difference saying where the
// rules first part; for a set or map, one difference per set counting its missing
// and extra elements. A missing table is one difference. The differences are
// added in a fixed order (chains, then sets and maps, then counters; within each,
// those of want before the extra ones, by name) although the maps are walked
// unsorted: sorting every name cost most of a comparison's time (26 ms at 10,000
// Services) and a difference is rare.
//
// It gives way when ctx is done (a sync wants the lock it runs under) and returns
// ctx's error, with r unchanged.
func CompareInventories(ctx context.Context, want, got *Inventory, r *drift.Report) error {
	if want.Exists && !got.Exists {
		r.Add(drift.Difference{Kind: "table", Change: drift.Missing})
		return nil
	}
	c := comparison{ctx: ctx}
	for name, w := range want.Chains {
		switch g := got.Chains[name]; {
		case g == nil:
			c.add(0, drift.Difference{Kind: "chain", Name: name, Change: drift.Missing})
		case g.Def != w.Def:
			c.add(0, drift.Difference{Kind: "chain", Name: name, Change: drift.Changed, Detail: "definition (hook, type, priority, policy or comment)"})
		case !slices.Equal(g.Rules, w.Rules):
			c.add(0, drift.Difference{Kind: "rule", Name: name, Change: drift.Changed, Detail: rulesDetail(w.Rules, g.Rules)})
		}
		if c.visit(1) {
			return ctx.Err()
		}
	}
	for name := range got.Chains {
		if want.Chains[name] == nil {
			c.add(1, drift.Difference{Kind: "chain", Name: name, Change: drift.Extra})
		}
		if c.visit(1) {
			return ctx.Err()
		}
	}
	for name, w := range want.Sets {
		kind := setKind(w)
		switch g := got.Sets[name]; {
		case g == nil:
			c.add(2, drift.Difference{Kind: kind, Name: name, Change: drift.Missing})
		case g.Def != w.Def || g.Map != w.Map:
			c.add(2, drift.Difference{Kind: kind, Name: name, Change: drift.Changed, Detail: "definition (type, flags, timeout or comment)"})
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
				c.add(2, drift.Difference{Kind: "element", Name: name, Change: drift.Changed, Detail: detail})
			}
			if c.visit(len(w.Elements) + len(g.Elements)) {
				return ctx.Err()
			}
		}
		if c.visit(1) {
			return ctx.Err()
		}
	}
	for name, g := range got.Sets {
		if want.Sets[name] == nil {
			c.add(3, drift.Difference{Kind: setKind(g), Name: name, Change: drift.Extra})
		}
		if c.visit(1) {
			return ctx.Err()
		}
	}
	for name := range want.Counters {
		if !got.Counters[name] {
			c.add(4, drift.Difference{Kind: "counter", Name: name, Change: drift.Missing})
		}
	}
	for name := range got.Counters {
		if !want.Counters[name] {
			c.add(5, drift.Difference{Kind: "counter", Name: name, Change: drift.Extra})
		}
	}
	slices.SortFunc(c.found, func(a, b ordered) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.d.Name, b.d.Name))
	})
	for _, f := range c.found {
		r.Add(f.d)
	}
	return nil
}

// comparison is one CompareInventories: the differences found so far, each with
// the group that orders it, and how many objects it visited since it last looked
// at its context.
type comparison struct {
	ctx     context.Context
	found   []ordered
	visited int
}

type ordered struct {
	group int
	d     drift.Difference
}

func (c *comparison) add(group int, d drift.Difference) {
	c.found = append(c.found, ordered{group, d})
}

// visit counts n objects compared and reports whether the comparison must stop
// (its context is done), looking at the context every compareCheckEvery objects.
func (c *comparison) visit(n int) bool {
	c.visited += n
	if c.visited < compareCheckEvery {
		return false
	}
	c.visited = 0
	return c.ctx.Err() != nil
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
