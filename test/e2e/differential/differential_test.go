package differential

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/test/lab"
	"github.com/kproxy/kproxy/test/vm"
)

// TestDifferential runs every case of the corpus through upstream kube-proxy and
// kproxy and fails on each difference the allow-list does not list, then on each
// allow-list entry that matched nothing it was about (see doc.go). Phases run in
// order: offline (parallel), cleanup, lab (one proxy at a time in node1).
func TestDifferential(t *testing.T) {
	l := suite.Lab(t)
	up, ours := binaries(t)
	cases, allow := loadInputs(t)
	if err := checkNoKubeconfig(); err != nil {
		t.Fatal(err)
	}
	ledger := NewLedger(allow)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	// Offline runs share one private namespace: they write nothing that another
	// run reads (at most the rule cleanup of a mode switch before they fail).
	offNS, err := l.NewScratchNamespace(ctx, fmt.Sprintf("offline%d", scratchSeq.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.DeleteNamespace(context.Background(), offNS) })
	t.Run("offline", func(t *testing.T) {
		for _, c := range cases {
			if c.Cleanup || len(c.Compare) == 0 || !runsHere(c) {
				continue
			}
			t.Run(c.Name, func(t *testing.T) {
				t.Parallel()
				ru, ro := runBoth(t, func(b Binary) (Result, error) {
					return runOffline(ctx, offNS, b, c, filepath.Join(t.TempDir(), b.Name))
				}, up, ours)
				compareOffline(t, ledger, c, ru, ro)
			})
		}
	})
	t.Run("cleanup", func(t *testing.T) {
		for _, c := range cases {
			if !c.Cleanup || !runsHere(c) {
				continue
			}
			t.Run(c.Name, func(t *testing.T) {
				// In the VM (two emulated CPUs) one case at a time: three at once
				// took both binaries past the run's bound.
				if !vm.InVM() {
					t.Parallel()
				}
				var mu sync.Mutex
				left := map[string]map[string]string{}
				ru, ro := runBoth(t, func(b Binary) (Result, error) {
					role := fmt.Sprintf("clean%d", scratchSeq.Add(1))
					r, rules, err := runCleanup(ctx, l, b, c, role, filepath.Join(t.TempDir(), b.Name))
					mu.Lock()
					left[b.Name] = rules
					mu.Unlock()
					return r, err
				}, up, ours)
				compareOffline(t, ledger, c, ru, ro)
				if checkAspect(t, ledger, c.Name, AspectCleanup, DiffSets(c.Name, AspectCleanup, left[Upstream], left[Ours])) {
					t.Logf("upstream: %s", ru.Summary())
					t.Logf("kproxy:   %s", ro.Summary())
				}
			})
		}
	})
	t.Run("lab", func(t *testing.T) {
		if err := createLabService(ctx, l); err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			if c.Lab == nil || !runsHere(c) {
				continue
			}
			t.Run(c.Name, func(t *testing.T) { runLabCase(ctx, t, l, offNS, ledger, c, up, ours) })
		}
	})

	stale, unjudged := ledger.Stale()
	for _, a := range stale {
		if a.VMOnly(cases) != vm.InVM() {
			// Judged by the other process's share of the corpus (see VMOnly).
			unjudged = append(unjudged, a)
			continue
		}
		t.Errorf("stale allow-list entry (the difference it allows is gone: remove it from %s): %s", AllowListPath, a)
	}
	for _, a := range unjudged {
		t.Logf("allow-list entry not judged in this run (nothing it is about was compared): %s", a)
	}
	if t.Failed() || testing.Verbose() {
		found := ledger.Found()
		var b strings.Builder
		for _, d := range found {
			b.WriteString("\n  - " + d.String())
		}
		t.Logf("%d difference(s) found in all:%s", len(found), b.String())
	}
}

// runsHere says whether c runs in this process: the VM cases (IPVS) only in the
// test VM, the others only outside it (TestDifferentialInVM runs the VM's share).
func runsHere(c *Case) bool { return c.VM == vm.InVM() }

// scratchSeq numbers the private namespaces of this process (their names must be
// unique while they exist, also across -count runs).
var scratchSeq atomic.Int64

// runBoth runs both binaries concurrently (they do not share state) and fails t if
// either could not be run at all.
func runBoth(t *testing.T, run func(Binary) (Result, error), up, ours Binary) (Result, Result) {
	t.Helper()
	var wg sync.WaitGroup
	var rs [2]Result
	var errs [2]error
	for i, b := range []Binary{up, ours} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs[i], errs[i] = run(b)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return rs[0], rs[1]
}

func compareOffline(t *testing.T, ledger *Ledger, c *Case, ru, ro Result) {
	t.Helper()
	for _, a := range c.Compare {
		if a == AspectCleanup {
			continue
		}
		checkAspect(t, ledger, c.Name, a, OfflineDiffs(c.Name, a, ru, ro))
	}
	if t.Failed() {
		t.Logf("upstream: %s", ru.Summary())
		t.Logf("kproxy:   %s", ro.Summary())
	}
}

func runLabCase(ctx context.Context, t *testing.T, l *lab.Lab, offNS *lab.NS, ledger *Ledger, c *Case, up, ours Binary) {
	args, err := labConfig(l, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := conntrackGuard(ctx, offNS, up, args, t.TempDir()); err != nil {
		t.Skipf("not run in the lab: %v", err)
	}
	obs := map[string]Observation{}
	for _, b := range []Binary{up, ours} {
		o, err := observe(ctx, l, b, c.Name, args)
		if err != nil {
			t.Fatalf("%s: %v", b.Name, err)
		}
		obs[b.Name] = o
	}
	for _, a := range c.Lab.Compare {
		if diffs, ok := LabDiffs(c.Name, a, obs[Upstream], obs[Ours]); ok {
			checkAspect(t, ledger, c.Name, a, diffs)
		}
	}
	for _, n := range []string{Upstream, Ours} {
		o := obs[n]
		t.Logf("%s: %s; events: %s", n, o.Outcome(), describeEvents(o.Events))
		if t.Failed() || o.Exited {
			t.Logf("%s log tail:\n%s", n, indent(o.Log, "    "))
		}
	}
}

var (
	labServiceOnce sync.Once
	labServiceErr  error
)

// createLabService gives the proxies something to program, once per lab: a
// dual-stack NodePort Service with an endpoint on each node (both proxies see the
// same objects).
func createLabService(ctx context.Context, l *lab.Lab) error {
	labServiceOnce.Do(func() { labServiceErr = createService(ctx, l) })
	return labServiceErr
}

func createService(ctx context.Context, l *lab.Lab) error {
	_, err := l.CreateWebService(ctx, "diff-web", v1.ServiceTypeNodePort)
	return err
}
