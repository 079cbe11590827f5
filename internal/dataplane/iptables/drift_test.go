package iptables

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/dataplane/dptest"
	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
	"github.com/kproxy/kproxy/internal/drift"
	"github.com/kproxy/kproxy/internal/iptables"
)

func differences(t *testing.T, f *fixture) []string {
	t.Helper()
	return dptest.Differences(t, f.proxier.Verify)
}

// TestVerify: right after a sync the kernel holds what was applied; a flushed
// KUBE-SERVICES, a deleted jump, a deleted chain and a stale per-ServicePort chain
// are each the difference they are.
func TestVerify(t *testing.T) {
	f := newFixture(t)
	if _, err := f.proxier.Verify(context.Background()); !errors.Is(err, proxycore.ErrNothingApplied) {
		t.Fatalf("Verify before the first sync: %v, want ErrNothingApplied", err)
	}
	f.AddStandardServices()
	f.sync()
	if d := differences(t, f); len(d) > 0 {
		t.Fatalf("differences right after a sync:\n%s", strings.Join(d, "\n"))
	}

	ctx := context.Background()
	if err := f.ipt.FlushChain(ctx, iptables.TableNAT, "KUBE-SERVICES"); err != nil {
		t.Fatal(err)
	}
	if err := f.ipt.DeleteRule(ctx, iptables.TableNAT, "PREROUTING", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ipt.EnsureChain(ctx, iptables.TableNAT, "KUBE-SVC-STALESTALESTALE"); err != nil {
		t.Fatal(err)
	}
	d := differences(t, f)
	want := []string{
		"changed rule nat KUBE-SERVICES: ",
		"extra chain nat KUBE-SVC-STALESTALESTALE",
		"missing rule nat PREROUTING: the jump to KUBE-SERVICES",
	}
	if len(d) != len(want) {
		t.Fatalf("differences:\n%s\nwant %d", strings.Join(d, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(d[i], want[i]) {
			t.Errorf("difference %d = %q, want it to start with %q", i, d[i], want[i])
		}
	}
}

// TestDriftCheckRepairs: the background comparison finds a flushed KUBE-SERVICES
// a period after the last full sync, requests a full sync and triggers it.
func TestDriftCheckRepairs(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.DriftCheckPeriod = 30 * time.Second })
	triggered := dptest.RunDriftChecks(t, f.proxier.RunDriftChecks)
	f.AddStandardServices()
	f.sync()
	if err := f.ipt.FlushChain(context.Background(), iptables.TableNAT, "KUBE-SERVICES"); err != nil {
		t.Fatal(err)
	}
	f.Clock.Step(30 * time.Second)
	dptest.WaitTriggered(t, triggered)
	if r := f.proxier.core.LastDrift(); r == nil || r.Count != 1 {
		t.Fatalf("LastDrift = %+v, want the flushed chain", r)
	}
	restores := f.restores()
	f.sync()
	if f.restores() != restores+1 || !strings.Contains(f.lastRestore(), "-A KUBE-SERVICES") {
		t.Fatal("the requested full sync did not rewrite KUBE-SERVICES")
	}
	if d := differences(t, f); len(d) > 0 {
		t.Fatalf("differences after the repair:\n%s", strings.Join(d, "\n"))
	}
	if v := dptest.Value(t, f.Registry, "kubeproxy_kproxy_drift_repairs_total", dptest.IPv4Label); v != 1 {
		t.Errorf("kubeproxy_kproxy_drift_repairs_total = %v, want 1", v)
	}
}

// TestCompareGivesWayToItsContext: a comparison whose context ended (a sync wants
// the lock) stops with the context's error instead of comparing every chain.
func TestCompareGivesWayToItsContext(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.sync()
	c := f.proxier.comparison()
	kernel, err := c.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var r drift.Report
	if err := c.Compare(ctx, kernel, &r); !errors.Is(err, context.Canceled) {
		t.Fatalf("Compare with an ended context = %v, want context.Canceled", err)
	}
	if err := c.Compare(context.Background(), kernel, &r); err != nil || len(r.Differences) > 0 {
		t.Fatalf("Compare after a sync = %v with %d differences, want none", err, len(r.Differences))
	}
}
