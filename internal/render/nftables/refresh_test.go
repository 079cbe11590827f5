package nftables

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"
)

// existingOf lists the chains, sets, maps and counters of st, as a listing of the kernel
// after st was programmed would, plus the extra names.
func existingOf(st *State, extraChains, extraSets, extraMaps []string) *Existing {
	ex := &Existing{Chains: slices.Clone(extraChains), Sets: slices.Clone(extraSets), Maps: slices.Clone(extraMaps)}
	seen := map[string]bool{}
	add := func(f *Fragment) {
		for _, c := range f.Chains {
			ex.Chains = append(ex.Chains, c.Name)
		}
		for _, c := range f.Counters {
			ex.Counters = append(ex.Counters, c.Name)
		}
		for _, c := range f.Containers {
			if seen[c.Name] {
				continue
			}
			seen[c.Name] = true
			if c.IsMap {
				ex.Maps = append(ex.Maps, c.Name)
			} else {
				ex.Sets = append(ex.Sets, c.Name)
			}
		}
	}
	add(st.base)
	for _, n := range st.sortedNames() {
		add(st.services[n])
	}
	return ex
}

// affinityCase is the session-affinity expected-output case.
func affinityCase(t *testing.T) (*Config, *State) {
	t.Helper()
	for _, c := range renderCases() {
		if c.name == "session affinity" {
			cfg, views := c.build()
			return cfg, renderAll(cfg, views...)
		}
	}
	t.Fatal("no session affinity case")
	return nil, nil
}

// affinitySets returns the names of st's dynamic (session-affinity) sets.
func affinitySets(st *State) []string {
	var out []string
	for _, f := range st.services {
		for _, c := range f.Containers {
			if c.Timeout > 0 {
				out = append(out, c.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestRefreshScriptIsWriteRefreshText: RefreshScript writes exactly the text of
// WriteRefresh's transaction, for every expected-output case, with stale objects
// to delete.
func TestRefreshScriptIsWriteRefreshText(t *testing.T) {
	for _, c := range renderCases() {
		cfg, views := c.build()
		st := renderAll(cfg, views...)
		existing := existingOf(st, []string{"stale-chain"}, []string{"stale-set"}, []string{"stale-map"})
		existing.Counters = append(existing.Counters, "stale-counter")
		tx := knftables.NewFake(cfg.Family, TableName).NewTransaction()
		WriteRefresh(tx, st, existing)
		var got strings.Builder
		for piece := range RefreshScript(st, existing, cfg.Family, 512) {
			got.WriteString(piece)
		}
		if got.String() != tx.String() {
			t.Fatalf("%s: script differs from the transaction's text:\n--- script\n%s\n--- transaction\n%s", c.name, got.String(), tx.String())
		}
		if strings.Contains(got.String(), "delete table") {
			t.Errorf("%s: a refresh deletes the table", c.name)
		}
	}
}

// TestWriteRefreshKeepsAffinity: a refresh of a table holding s's objects, plus
// foreign ones and affinity memory stored by the packet path, leaves exactly s's
// objects with the affinity memory kept, as upstream keeps it across full syncs.
func TestWriteRefreshKeepsAffinity(t *testing.T) {
	cfg, st := affinityCase(t)
	fake, _ := programFull(t, cfg)
	tx := fake.NewTransaction()
	WriteFull(tx, st)
	sets := affinitySets(st)
	if len(sets) == 0 {
		t.Fatal("the session affinity case has no affinity set")
	}
	// What the packet path stored, and what someone else added to the table.
	tx.Add(&knftables.Element{Set: sets[0], Key: []string{"10.0.0.9"}})
	tx.Add(&knftables.Chain{Name: "foreign-chain"})
	tx.Add(&knftables.Map{Name: "foreign-map", Type: "ipv4_addr : verdict"})
	tx.Add(&knftables.Element{Map: "foreign-map", Key: []string{"10.9.9.9"}, Value: []string{"goto foreign-chain"}})
	tx.Flush(&knftables.Chain{Name: chainServices}) // drift in one of ours
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	chains, _ := fake.List(ctx, "chains")
	setNames, _ := fake.List(ctx, "sets")
	maps, _ := fake.List(ctx, "maps")
	tx = fake.NewTransaction()
	WriteRefresh(tx, st, &Existing{Chains: chains, Sets: setNames, Maps: maps})
	if err := fake.Run(ctx, tx); err != nil {
		t.Fatalf("refresh refused: %v\n%s", err, tx.String())
	}

	want, _ := programFull(t, cfg)
	full := want.NewTransaction()
	WriteFull(full, st)
	full.Add(&knftables.Element{Set: sets[0], Key: []string{"10.0.0.9"}})
	if err := want.Run(ctx, full); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sortedDump(want.Dump()), sortedDump(fake.Dump())); diff != "" {
		t.Errorf("refreshed table (-want +got):\n%s", diff)
	}
}

// sortedDump sorts a Fake dump's lines (the Fake keeps insertion order).
func sortedDump(dump string) []string {
	lines := strings.Split(strings.TrimSpace(dump), "\n")
	slices.Sort(lines)
	return lines
}
