package nftables

import (
	"strings"
	"testing"

	"sigs.k8s.io/knftables"
)

// TestFullScriptIsWriteFullText: FullScript's pieces, concatenated, are exactly the
// text knftables writes for WriteFull's transaction, for every expected-output
// case (both layouts, both families, every kind of object) and at scale; pieces
// end at line breaks and stay near the size asked; a second iteration yields the
// same pieces, and stopping early yields no more.
func TestFullScriptIsWriteFullText(t *testing.T) {
	type input struct {
		name string
		cfg  *Config
		st   *State
	}
	var inputs []input
	for _, c := range renderCases() {
		cfg, views := c.build()
		inputs = append(inputs, input{c.name, cfg, renderAll(cfg, views...)})
	}
	scaleCfg := testConfig(knftables.IPv4Family)
	scaleCfg.EndpointMaps = true
	inputs = append(inputs, input{"scale", scaleCfg, renderAll(scaleCfg, scaleViews(300, 10)...)})

	for _, in := range inputs {
		tx := knftables.NewFake(in.cfg.Family, TableName).NewTransaction()
		WriteFull(tx, in.st)
		want := tx.String()
		const partBytes = 2048
		for iteration := range 2 {
			var got strings.Builder
			for piece := range FullScript(in.st, in.cfg.Family, partBytes) {
				if !strings.HasSuffix(piece, "\n") || len(piece) > partBytes+4096 {
					t.Fatalf("%s: piece of %d bytes not ending a line", in.name, len(piece))
				}
				got.WriteString(piece)
			}
			if got.String() != want {
				t.Fatalf("%s, iteration %d: script differs from the transaction's text:\n--- script\n%s\n--- transaction\n%s", in.name, iteration, got.String(), want)
			}
		}
	}

	last := inputs[len(inputs)-1]
	n := 0
	for range FullScript(last.st, last.cfg.Family, 1024) {
		n++
		if n == 2 {
			break
		}
	}
	if n != 2 {
		t.Fatalf("iterated %d pieces after a break at 2", n)
	}
}

// TestRenderServicesInParallel: rendering many views on several goroutines gives
// each view's own RenderService result.
func TestRenderServicesInParallel(t *testing.T) {
	cfg := testConfig(knftables.IPv4Family)
	cfg.EndpointMaps = true
	views := scaleViews(3000, 4)
	got := RenderServices(cfg, views)
	if len(got) != len(views) {
		t.Fatalf("%d fragments for %d views", len(got), len(views))
	}
	for _, v := range views {
		want := RenderService(cfg, v)
		if !got[v.Name].Equal(&want) {
			t.Fatalf("fragment of %s differs from RenderService's", v.Name)
		}
	}
}
