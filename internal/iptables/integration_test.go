//go:build linux

package iptables

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/kproxy/kproxy/internal/testing/netnsexec"
	"github.com/kproxy/kproxy/internal/testing/roottest"
)

// nsExec runs every command inside one network namespace (netnsexec.Exec).
type nsExec struct{ netnsexec.Exec }

func (e nsExec) mustRun(t *testing.T, cmd string, args ...string) string {
	t.Helper()
	out, err := e.Command(cmd, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %q in %s: %v: %s", cmd, args, e.NS, err, out)
	}
	return string(out)
}

// newTestNetns creates a uniquely named kpl- namespace, deleted at the end
// of t, and returns an exec running in it.
func newTestNetns(t *testing.T) nsExec {
	t.Helper()
	roottest.Require(t, "creates a network namespace and programs iptables in it", "ip")
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("kpl-%d-ipt-%s", os.Getpid(), hex.EncodeToString(b))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("deleting netns %s: %v: %s", name, err, out)
		}
	})
	return nsExec{netnsexec.Exec{NS: name}}
}

// backends returns the backends whose binaries of both families exist. Every
// integration test starts with it, so it also skips them where namespaces cannot be
// created (and in -short mode) before they look for binaries.
func backends(t *testing.T) []Backend {
	roottest.Require(t, "creates a network namespace and programs iptables in it", "ip")
	var out []Backend
	for _, b := range []Backend{BackendNFT, BackendLegacy} {
		ok := true
		for _, base := range []string{"iptables", "ip6tables"} {
			for _, tool := range []string{"", "-save", "-restore"} {
				if _, err := exec.LookPath(base + "-" + string(b) + tool); err != nil {
					ok = false
				}
			}
		}
		if ok {
			out = append(out, b)
		} else {
			t.Logf("iptables-%s binaries missing: backend not tested", b)
		}
	}
	if len(out) == 0 {
		t.Skip("needs iptables-nft or iptables-legacy")
	}
	return out
}

// saved returns one table of a real iptables-save without its "#" lines.
func saved(t *testing.T, ipt Interface, table Table) string {
	t.Helper()
	var buf bytes.Buffer
	if err := ipt.SaveInto(context.Background(), table, &buf); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if !strings.HasPrefix(line, "#") {
			out.WriteString(line)
		}
	}
	return out.String()
}

// TestIntegrationFakeAgreesWithReal applies the same restore inputs to the
// real binaries (IPv4, in a namespace) and to the Fake and compares what
// iptables-save prints with the Fake's dump, then checks failures alike.
func TestIntegrationFakeAgreesWithReal(t *testing.T) {
	for _, backend := range backends(t) {
		t.Run(string(backend), func(t *testing.T) {
			nsx := newTestNetns(t)
			ctx := context.Background()
			real := New(nsx, v1.IPv4Protocol, backend)
			fake := NewFake(v1.IPv4Protocol)
			if !real.Present(ctx) {
				t.Fatal("iptables not present in a fresh namespace")
			}
			for i, step := range restoreSteps {
				if err := real.Restore(ctx, []byte(step)); err != nil {
					t.Fatalf("real restore step %d: %v", i, err)
				}
				if err := fake.Restore(ctx, []byte(step)); err != nil {
					t.Fatalf("fake restore step %d: %v", i, err)
				}
			}
			for _, table := range []Table{TableFilter, TableNAT, TableMangle} {
				if diff := cmp.Diff(fake.Dump(table), saved(t, real, table)); diff != "" {
					t.Errorf("%s: iptables-save differs from the fake (-fake +real):\n%s", table, diff)
				}
			}

			// A failing second section: the same line is named, the first
			// section stays committed and the failing one changes nothing.
			bad := "*filter\n:KUBE-COMMITTED - [0:0]\nCOMMIT\n*nat\n:KUBE-SVC-AAAAAAAAAAAAAAAA - [0:0]\n-A KUBE-NOPE -j RETURN\nCOMMIT\n"
			realErr, fakeErr := real.Restore(ctx, []byte(bad)), fake.Restore(ctx, []byte(bad))
			var re, fe *RestoreError
			if !errors.As(realErr, &re) || !errors.As(fakeErr, &fe) {
				t.Fatalf("errors %v / %v are not *RestoreError", realErr, fakeErr)
			}
			if re.Line != 6 || fe.Line != 6 {
				t.Errorf("failing line: real %d (%v), fake %d; want 6", re.Line, realErr, fe.Line)
			}
			t.Logf("real restore error: %v", realErr)
			for _, table := range []Table{TableFilter, TableNAT} {
				if diff := cmp.Diff(fake.Dump(table), saved(t, real, table)); diff != "" {
					t.Errorf("%s after a failed restore (-fake +real):\n%s", table, diff)
				}
			}
			if !fake.HasChain(TableFilter, "KUBE-COMMITTED") {
				t.Error("the committed section was discarded")
			}

			// Every failure the fake reproduces, the real one has too.
			for _, in := range []string{
				"*nat\n-D KUBE-MARK-MASQ -j RETURN\nCOMMIT\n",
				"*nat\n-X KUBE-SVC-AAAAAAAAAAAAAAAA\nCOMMIT\n",
				"*nat\n-X KUBE-NOPE\nCOMMIT\n",
				"*nat\n-A KUBE-SERVICES -j DROP\nCOMMIT\n",
				"*nat\n-A KUBE-SERVICES -j KUBE-NOPE\nCOMMIT\n",
				"*nat\n:KUBE-SVC-ABCDEFGHIJKLMNOPQRSTUVWXYZ - [0:0]\nCOMMIT\n",
				"*nat\n-I KUBE-SERVICES 5 -j RETURN\nCOMMIT\n",
			} {
				rerr, ferr := real.Restore(ctx, []byte(in)), fake.Restore(ctx, []byte(in))
				if rerr == nil || ferr == nil {
					t.Errorf("restore of %q: real %v, fake %v; want both to fail", in, rerr, ferr)
				}
			}
			if diff := cmp.Diff(fake.Dump(TableNAT), saved(t, real, TableNAT)); diff != "" {
				t.Errorf("nat after failed restores (-fake +real):\n%s", diff)
			}
		})
	}
}

// TestIntegrationExec checks every method of Exec against the real binaries
// of both families and backends.
func TestIntegrationExec(t *testing.T) {
	for _, backend := range backends(t) {
		for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
			t.Run(string(backend)+"/"+string(fam), func(t *testing.T) {
				nsx := newTestNetns(t)
				ctx := context.Background()
				ipt := New(nsx, fam, backend)
				if !ipt.Present(ctx) {
					t.Fatal("not present")
				}
				comment := []string{"-m", "comment", "--comment", "ns/svc:port cluster IP", "-j", "KUBE-SERVICES"}
				if existed, err := ipt.EnsureChain(ctx, TableNAT, "KUBE-SERVICES"); existed || err != nil {
					t.Fatalf("EnsureChain = %v, %v", existed, err)
				}
				if existed, err := ipt.EnsureChain(ctx, TableNAT, "KUBE-SERVICES"); !existed || err != nil {
					t.Fatalf("EnsureChain again = %v, %v", existed, err)
				}
				if ok, err := ipt.ChainExists(ctx, TableNAT, "KUBE-SERVICES"); !ok || err != nil {
					t.Errorf("ChainExists = %v, %v", ok, err)
				}
				if ok, err := ipt.ChainExists(ctx, TableNAT, "KUBE-NOPE"); ok || err != nil {
					t.Errorf("ChainExists of an absent chain = %v, %v", ok, err)
				}
				for range 2 {
					if _, err := ipt.EnsureRule(ctx, false, TableNAT, ChainOutput, comment...); err != nil {
						t.Fatal(err)
					}
				}
				if existed, err := ipt.EnsureRule(ctx, true, TableNAT, ChainOutput, "-j", "RETURN"); existed || err != nil {
					t.Fatalf("EnsureRule prepend = %v, %v", existed, err)
				}
				want := "-A OUTPUT -j RETURN\n-A OUTPUT -m comment --comment \"ns/svc:port cluster IP\" -j KUBE-SERVICES\n"
				if got := saved(t, ipt, TableNAT); !strings.Contains(got, want) {
					t.Errorf("nat after EnsureRule:\n%s\nwant it to contain\n%s", got, want)
				}
				// A second copy added behind EnsureRule's back: DeleteRule removes both.
				nsx.mustRun(t, binaryName(nsx, fam, backend, ""), append([]string{"-t", "nat", "-A", "OUTPUT"}, comment...)...)
				if err := ipt.DeleteRule(ctx, TableNAT, ChainOutput, comment...); err != nil {
					t.Fatal(err)
				}
				if got := saved(t, ipt, TableNAT); strings.Contains(got, "KUBE-SERVICES\n") && strings.Contains(got, "-A OUTPUT -m comment") {
					t.Errorf("rule copies left:\n%s", got)
				}
				if err := ipt.DeleteRule(ctx, TableNAT, ChainOutput, comment...); err != nil {
					t.Errorf("DeleteRule of an absent rule: %v", err)
				}
				if err := ipt.DeleteRule(ctx, TableNAT, "KUBE-NOPE", "-j", "RETURN"); err != nil {
					t.Errorf("DeleteRule in an absent chain: %v", err)
				}
				if err := ipt.Restore(ctx, []byte("*nat\n-A KUBE-SERVICES -j RETURN\nCOMMIT\n*filter\n:KUBE-FORWARD - [0:0]\nCOMMIT\n")); err != nil {
					t.Fatal(err)
				}
				if err := ipt.DeleteChain(ctx, TableNAT, "KUBE-SERVICES"); err == nil {
					t.Error("DeleteChain of a chain with rules succeeded")
				}
				if err := ipt.FlushChain(ctx, TableNAT, "KUBE-SERVICES"); err != nil {
					t.Fatal(err)
				}
				for _, c := range []struct {
					table Table
					chain Chain
				}{{TableNAT, "KUBE-SERVICES"}, {TableFilter, "KUBE-FORWARD"}, {TableNAT, "KUBE-NOPE"}} {
					if err := ipt.DeleteChain(ctx, c.table, c.chain); err != nil {
						t.Errorf("DeleteChain %s/%s: %v", c.table, c.chain, err)
					}
				}
				if err := ipt.FlushChain(ctx, TableNAT, "KUBE-NOPE"); err == nil {
					t.Error("FlushChain of an absent chain succeeded")
				}
				if got := saved(t, ipt, TableNAT); strings.Contains(got, "KUBE-") {
					t.Errorf("chains left:\n%s", got)
				}
				var buf bytes.Buffer
				if err := ipt.SaveInto(ctx, "bogus", &buf); err == nil || buf.Len() != 0 {
					t.Errorf("SaveInto of an unknown table: %v, %q", err, buf.String())
				}
			})
		}
	}
}

func TestIntegrationDetectBackend(t *testing.T) {
	for _, backend := range backends(t) {
		t.Run(string(backend), func(t *testing.T) {
			nsx := newTestNetns(t)
			if got := DetectBackend(context.Background(), nsx); got != BackendNFT {
				t.Errorf("DetectBackend without hints = %q, want nft", got)
			}
			nsx.mustRun(t, "iptables-"+string(backend), "-t", "mangle", "-N", "KUBE-IPTABLES-HINT")
			if got := DetectBackend(context.Background(), nsx); got != backend {
				t.Errorf("DetectBackend = %q, want %q", got, backend)
			}
		})
	}
}

// TestIntegrationMonitor flushes the canaries with the real binaries and
// expects a reload.
func TestIntegrationMonitor(t *testing.T) {
	for _, backend := range backends(t) {
		t.Run(string(backend), func(t *testing.T) {
			nsx := newTestNetns(t)
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			ipt := New(nsx, v1.IPv4Protocol, backend)
			reloaded := make(chan struct{}, 10)
			done := make(chan error, 1)
			go func() {
				done <- Monitor(ctx, ipt, CanaryChain, monitorTables, func() { reloaded <- struct{}{} }, 50*time.Millisecond)
			}()
			deadline := time.Now().Add(bound)
			for {
				if ok, _ := ipt.ChainExists(context.Background(), TableFilter, CanaryChain); ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("canaries not created")
				}
				time.Sleep(10 * time.Millisecond)
			}
			// What "iptables -F; iptables -X" in every table does to us.
			for _, table := range monitorTables {
				nsx.mustRun(t, "iptables-"+string(backend), "-t", string(table), "-X", string(CanaryChain))
			}
			select {
			case <-reloaded:
			case <-time.After(bound):
				t.Fatalf("no reload within %s of the flush", bound)
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(bound):
				t.Fatal("Monitor did not return")
			}
			for _, table := range monitorTables {
				if ok, _ := ipt.ChainExists(context.Background(), table, CanaryChain); ok {
					t.Errorf("canary left in %s after the monitor stopped", table)
				}
			}
		})
	}
}
