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
			{"full", render.FullOps(in.st), render.FullScript(in.st, in.cfg.Family, 64<<10)},
			{"refresh", render.RefreshOps(in.st, existing), render.RefreshScript(in.st, existing, in.cfg.Family, 64<<10)},
		} {
			want, err := ex.build(sync.script, nil, true)
			if err != nil {
				t.Fatalf("%s %s: text: %v", in.name, sync.name, err)
			}
			got, err := ex.buildOps(sync.ops, nil, true)
			if err != nil {
				t.Fatalf("%s %s: ops: %v", in.name, sync.name, err)
			}
			if !bytes.Equal(slices.Concat(got.b.buffers()...), slices.Concat(want.buffers()...)) {
				t.Errorf("%s %s: the batch of the operations differs from the batch of their text", in.name, sync.name)
			}
		}
	}
}

// TestBuildOpsIsBuildTextForDeltas: the batch of every partial sync of the
// renderer's plan scenarios (deltaSteps) written from its typed operations is
// byte for byte the batch of the knftables transaction text of the same
// operations, the path partial syncs took before they were typed. Each delta
// follows the full sync of the state it applies to, in one batch, so that every
// set is defined without a kernel.
func TestBuildOpsIsBuildTextForDeltas(t *testing.T) {
	cfg := testConfig(knftables.IPv4Family)
	steps, st := deltaStepsOn(cfg, 200)
	ex, err := New(cfg.Family, render.TableName, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range steps {
		before := slices.Collect(render.FullOps(st))
		delta, commit := step.write()
		ops := slices.Concat(before, delta)
		tx := ex.NewTransaction()
		render.AddOps(tx, slices.Values(ops))
		want, err := ex.build(oneText(tx.String()), nil, true)
		if err != nil {
			t.Fatalf("%s: text: %v", step.name, err)
		}
		got, err := ex.buildOps(slices.Values(ops), nil, true)
		if err != nil {
			t.Fatalf("%s: ops: %v", step.name, err)
		}
		if !bytes.Equal(slices.Concat(got.b.buffers()...), slices.Concat(want.buffers()...)) {
			t.Errorf("%s: the batch of the operations differs from the batch of their text", step.name)
		}
		commit()
	}
}

// TestRunOpsIsOneTransaction: a full sync run as typed operations programs the
// table RunScript programs from its text, within one LargeTransaction call; a
// kernel error aborts the whole batch and quotes the failing operation's text.
func TestRunOpsIsOneTransaction(t *testing.T) {
	needRoot(t)
	cfg := testConfig(knftables.IPv4Family)
	cfg.EndpointMaps = true
	st := renderState(cfg, scaleViews(2000, 10))
	if n := len(slices.Collect(render.FullOps(st))); n <= LargeTransactionOps {
		t.Fatalf("the full sync has %d operations, want more than LargeTransactionOps", n)
	}
	nsText, nsOps := testNetns(t), testNetns(t)
	ctx := context.Background()

	text, err := New(cfg.Family, render.TableName, Options{NetNSPath: netnsPath(nsText)})
	if err != nil {
		t.Fatal(err)
	}
	if err := text.RunScript(ctx, render.FullScript(st, cfg.Family, 64<<10)); err != nil {
		t.Fatalf("script: %v", err)
	}
	var largeCalls int
	ex, err := New(cfg.Family, render.TableName, Options{NetNSPath: netnsPath(nsOps),
		LargeTransaction: func(int) func() { largeCalls++; return func() {} }})
	if err != nil {
		t.Fatal(err)
	}
	ops := render.FullOps(st)
	if err := ex.RunOps(ctx, ops); err != nil {
		t.Fatalf("ops: %v", err)
	}
	if largeCalls != 1 {
		t.Errorf("LargeTransaction called %d times for a full sync, want 1", largeCalls)
	}
	// A partial sync's few operations do not call it.
	if err := ex.RunOps(ctx, slices.Values([]nft.Op{{Kind: nft.FlushChain, Name: "services"}})); err != nil {
		t.Fatal(err)
	}
	if largeCalls != 1 {
		t.Errorf("LargeTransaction called for a one-operation transaction")
	}
	if err := ex.RunOps(ctx, ops); err != nil {
		t.Fatalf("ops again: %v", err)
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

// TestBatchChunksNearlyFull: a large batch is kept in chunks that are full to
// within chunkHeadroom (their unused tails are memory held with the batch), and
// reading it into an inventory lets go of them.
func TestBatchChunksNearlyFull(t *testing.T) {
	cfg := testConfig(knftables.IPv4Family)
	cfg.EndpointMaps = true
	st := renderState(cfg, scaleViews(3000, 10))
	ex, err := New(cfg.Family, render.TableName, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ex.buildOps(render.FullOps(st), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.b.sealed) < 2 {
		t.Fatalf("%d sealed chunks for a %d-byte batch, want several", len(tr.b.sealed), tr.b.size())
	}
	for i, c := range tr.b.sealed {
		if cap(c) != batchChunkSize || len(c) < batchChunkSize-chunkHeadroom {
			t.Errorf("chunk %d: %d bytes of %d, want at least %d of %d", i, len(c), cap(c), batchChunkSize-chunkHeadroom, batchChunkSize)
		}
	}
	if tr.inventory(); tr.b.size() != 0 || tr.b.sealed != nil {
		t.Errorf("the builder holds %d bytes in %d chunks after the inventory read them", tr.b.size(), len(tr.b.sealed))
	}
}
