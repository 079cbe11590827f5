package nftnetlink

import (
	"bytes"
	"context"
	"iter"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/nft"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// TestBuildOpsIsBuildScript: the batch of a full sync and of a refresh written
// from typed operations is byte for byte the batch of their text, for every
// renderer case and at scale (no kernel needed: the syncs define every set).
func TestBuildOpsIsBuildScript(t *testing.T) {
	type input struct {
		name string
		cfg  *render.Config
		st   *render.State
	}
	var inputs []input
	for _, tc := range renderCases() {
		cfg, views := tc.build()
		inputs = append(inputs, input{tc.name, cfg, renderState(cfg, views)})
	}
	scale := testConfig(knftables.IPv4Family)
	scale.EndpointMaps = true
	inputs = append(inputs, input{"scale", scale, renderState(scale, scaleViews(300, 10))})
	existing := &render.Existing{Chains: []string{"services", "stale-chain"}, Sets: []string{"cluster-ips", "stale-set"},
		Maps: []string{"stale-map"}, Counters: []string{"stale-counter"}}
	for _, in := range inputs {
		ex, err := New(in.cfg.Family, render.TableName, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, sync := range []struct {
			name   string
			ops    iter.Seq[nft.Op]
			script iter.Seq[string]
		}{
			{"full", render.FullOps(in.st, in.cfg.Family), render.FullScript(in.st, in.cfg.Family, 64<<10)},
			{"refresh", render.RefreshOps(in.st, existing, in.cfg.Family), render.RefreshScript(in.st, existing, in.cfg.Family, 64<<10)},
		} {
			want, err := ex.build(sync.script, nil, true)
			if err != nil {
				t.Fatalf("%s %s: text: %v", in.name, sync.name, err)
			}
			got, err := ex.buildOps(sync.ops, nil, true)
			if err != nil {
				t.Fatalf("%s %s: ops: %v", in.name, sync.name, err)
			}
			if !bytes.Equal(slices.Concat(got.buffers()...), slices.Concat(want.buffers()...)) {
				t.Errorf("%s %s: the batch of the operations differs from the batch of their text", in.name, sync.name)
			}
		}
	}
}

// TestRunOpsIsOneTransaction: a full sync run as typed operations programs the
// table RunScript programs from its text; a kernel error aborts the whole batch
// and quotes the failing operation's text.
func TestRunOpsIsOneTransaction(t *testing.T) {
	needRoot(t)
	cfg := testConfig(knftables.IPv4Family)
	cfg.EndpointMaps = true
	st := renderState(cfg, scaleViews(500, 10))
	nsText, nsOps := testNetns(t), testNetns(t)
	ctx := context.Background()

	text, err := New(cfg.Family, render.TableName, Options{NetNSPath: netnsPath(nsText)})
	if err != nil {
		t.Fatal(err)
	}
	if err := text.RunScript(ctx, render.FullScript(st, cfg.Family, 64<<10)); err != nil {
		t.Fatalf("script: %v", err)
	}
	ex, err := New(cfg.Family, render.TableName, Options{NetNSPath: netnsPath(nsOps)})
	if err != nil {
		t.Fatal(err)
	}
	ops := render.FullOps(st, cfg.Family)
	if err := ex.RunOps(ctx, ops); err != nil {
		t.Fatalf("ops: %v", err)
	}
	want := listTable(t, nsText, cfg.Family, render.TableName)
	if got := listTable(t, nsOps, cfg.Family, render.TableName); got != want {
		t.Fatal("the table written from the operations differs from the one written from their text")
	}

	jump := &nft.Rule{Stmts: []nft.Stmt{nft.Verdict{Kind: nft.Jump, Chain: "no-such-chain"}}}
	bad := func(yield func(nft.Op) bool) {
		for op := range ops {
			if !yield(op) {
				return
			}
		}
		yield(nft.Op{Kind: nft.AddRule, Name: "services", Rule: jump})
	}
	err = ex.RunOps(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), "add rule ip kube-proxy services jump no-such-chain") {
		t.Fatalf("got %v, want an error quoting the failing operation", err)
	}
	if got := listTable(t, nsOps, cfg.Family, render.TableName); got != want {
		t.Fatal("a failed batch changed the table")
	}
}
