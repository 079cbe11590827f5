package nftnetlink

import (
	"testing"

	"sigs.k8s.io/knftables"

	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// BenchmarkBuildFull10k measures translating a full sync of 10,000 Services x 10
// endpoints into a netlink batch (no kernel involved).
func BenchmarkBuildFull10k(b *testing.B) {
	cfg := testConfig(knftables.IPv4Family)
	st := renderState(cfg, scaleViews(10000, 10))
	ex, err := New(cfg.Family, render.TableName, Options{})
	if err != nil {
		b.Fatal(err)
	}
	tx := ex.NewTransaction()
	render.WriteFull(tx, st)
	text := tx.String()
	b.ResetTimer()
	for b.Loop() {
		if _, err := ex.build(text, nil); err != nil {
			b.Fatal(err)
		}
	}
}
