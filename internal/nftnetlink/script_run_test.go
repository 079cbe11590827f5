package nftnetlink

import (
	"context"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// TestRunScriptIsOneTransaction: a full sync given as a script in pieces (larger
// than one batch chunk) programs the same table as the same sync in one transaction; a kernel
// error in a late part aborts the whole batch, leaving the table as it was, and
// the error quotes the failing command.
func TestRunScriptIsOneTransaction(t *testing.T) {
	needRoot(t)
	cfg := testConfig(knftables.IPv4Family)
	cfg.EndpointMaps = true
	st := renderState(cfg, scaleViews(2000, 10))
	nsWhole, nsParts := testNetns(t), testNetns(t)
	ctx := context.Background()

	whole, err := New(cfg.Family, render.TableName, Options{NetNSPath: netnsPath(nsWhole)})
	if err != nil {
		t.Fatal(err)
	}
	tx := whole.NewTransaction()
	render.WriteFull(tx, st)
	if err := whole.Run(ctx, tx); err != nil {
		t.Fatalf("one transaction: %v", err)
	}

	var largeCalls int
	ex, err := New(cfg.Family, render.TableName, Options{NetNSPath: netnsPath(nsParts),
		LargeTransaction: func(int) func() { largeCalls++; return func() {} }})
	if err != nil {
		t.Fatal(err)
	}
	script := render.FullScript(st, cfg.Family, 64<<10)
	n := 0
	for range script {
		n++
	}
	if n < 10 {
		t.Fatalf("%d pieces, want at least 10", n)
	}
	if err := ex.RunScript(ctx, script); err != nil {
		t.Fatalf("script: %v", err)
	}
	if largeCalls != 1 {
		t.Errorf("LargeTransaction called %d times, want 1", largeCalls)
	}
	want := listTable(t, nsWhole, cfg.Family, render.TableName)
	if got := listTable(t, nsParts, cfg.Family, render.TableName); got != want {
		t.Fatal("the table written from the script differs from the one written in one transaction")
	}

	// The same script again, with a bad rule at the end.
	bad := func(yield func(string) bool) {
		for piece := range script {
			if !yield(piece) {
				return
			}
		}
		yield("add rule ip kube-proxy services jump no-such-chain\n")
	}
	err = ex.RunScript(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), "jump no-such-chain") {
		t.Fatalf("got %v, want an error quoting the failing command", err)
	}
	if got := listTable(t, nsParts, cfg.Family, render.TableName); got != want {
		t.Fatal("a failed batch changed the table")
	}
}

// TestReadAhead: every value in order, the producer's goroutine gone when the
// iteration ends, also when the consumer stops early.
func TestReadAhead(t *testing.T) {
	var want []string
	for i := range 50 {
		want = append(want, strings.Repeat("x", i))
	}
	for _, stopAt := range []int{-1, 0, 3} {
		produced := 0
		seq := func(yield func(string) bool) {
			for _, v := range want {
				produced++
				if !yield(v) {
					return
				}
			}
		}
		var got []string
		for v := range readAhead(seq, 2) {
			if len(got) == stopAt {
				break
			}
			got = append(got, v)
		}
		// readAhead has joined its goroutine: produced is stable and readable.
		if stopAt < 0 {
			if !slices.Equal(got, want) || produced != len(want) {
				t.Fatalf("got %d values (%d produced), want all %d in order", len(got), produced, len(want))
			}
		} else if len(got) != stopAt || produced > stopAt+4 {
			t.Fatalf("stopping at %d: got %d values, %d produced", stopAt, len(got), produced)
		}
	}
}
