package nftables

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
	"github.com/kproxy/kproxy/test/lab/labtest"
)

// lockHeld is how long the test holds the xtables lock (issue 16: "the xtables
// lock held for 10 s"): longer than the proxy's wait for it (-w 5), so that
// restores fail, and than its health timeout (2 * lockSyncPeriod), so that
// /healthz reports the changes left unapplied.
const (
	lockHeld       = 10 * time.Second
	lockSyncPeriod = 3 * time.Second
)

// TestXtablesLockHeld (issue 16, kernel faults, short version: the xtables lock
// held for 10 s; iptables mode): the proxy runs on the iptables legacy backend
// (the only one with a lock: iptables-nft takes none), with XTABLES_LOCKFILE
// naming a private lock file, which the test then holds for lockHeld while a
// Service is deleted. Every iptables-restore of the proxy waits 5 s (-w 5) and
// fails: the failures are counted in
// kubeproxy_sync_proxy_rules_iptables_restore_failures_total, /healthz turns 503
// once the deletion has been queued for the health timeout, and the kernel keeps
// the whole previous state (iptables-legacy-save unchanged; the deleted Service
// still answers). Once the lock is released, the retry programs the deletion and
// /healthz is 200 again; an unchanged Service answers throughout.
//
// The host's lock (/run/xtables.lock) is never taken: every legacy command, the
// proxy's included, runs with XTABLES_LOCKFILE, and the test first checks that
// this iptables honours it. Before, the shared proxy's (nft backend) rules are
// removed with --cleanup, so that only the legacy backend's rules handle the
// traffic; after, the legacy proxy's rules and the backend hint are removed the
// same way and the shared proxy is started again.
func TestXtablesLockHeld(t *testing.T) {
	skipUnlessIPTablesMode(t, "the xtables lock is iptables' (the nftables mode takes none)")
	lock := filepath.Join(t.TempDir(), "xtables.lock")
	requireLegacyLockFile(t, lock)
	old := sharedProxy(t)
	l := old.Lab
	ctx := testCtx(t, 4*time.Minute)
	node := l.Node1.NS
	env := "XTABLES_LOCKFILE=" + lock
	legacy := func(ctx context.Context, fam v1.IPFamily, tool string, args ...string) (string, error) {
		bin := "iptables-legacy" + tool
		if fam == v1.IPv6Protocol {
			bin = "ip6tables-legacy" + tool
		}
		return node.Run(ctx, "env", append([]string{env, bin}, args...)...)
	}
	if out, err := node.Run(ctx, "iptables-nft-save", "-t", "mangle"); err != nil || regexp.MustCompile(`(?m)^:KUBE-(IPTABLES-HINT|KUBELET-CANARY) `).MatchString(out) {
		t.Fatalf("node1's iptables-nft has a kubelet hint chain (or cannot be read: %v): the proxy would keep the nft backend\n%s", err, out)
	}
	if _, err := legacy(ctx, v1.IPv4Protocol, "", "-w", "5", "-t", "mangle", "-S", "KUBE-IPTABLES-HINT"); err == nil {
		t.Fatal("node1 already has the legacy backend's hint chain: a previous run left it")
	}
	holder := &lockHolder{path: lock}
	t.Cleanup(holder.release)

	// From the shared proxy (nft backend) to one on the legacy backend.
	if err := old.Process.Stop(3 * time.Second); err != nil {
		t.Fatalf("stopping the shared proxy: %v", err)
	}
	t.Cleanup(func() {
		restoreSharedProxy(t)
		// The restored proxy is back on the nft backend, its rules complete.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := modeState(ctx, l, proxyMode()); err != nil {
			t.Errorf("after restoring the shared proxy: %v", err)
		}
	})
	if out, err := proxyCommandEnv(ctx, l, old.ConfigPath, env, "--cleanup"); err != nil {
		t.Fatalf("kube-proxy --cleanup of the nft backend's rules: %v\n%s", err, out)
	}
	if _, err := legacy(ctx, v1.IPv4Protocol, "", "-w", "5", "-t", "mangle", "-N", "KUBE-IPTABLES-HINT"); err != nil {
		t.Fatalf("creating the legacy backend's hint chain: %v", err)
	}
	t.Cleanup(func() {
		// Runs after the legacy proxy stopped and its rules were removed.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := legacy(ctx, v1.IPv4Protocol, "", "-w", "5", "-t", "mangle", "-X", "KUBE-IPTABLES-HINT"); err != nil {
			t.Errorf("deleting the legacy backend's hint chain (later proxies would use the legacy backend): %v", err)
		}
		for _, fam := range lab.Families {
			// --cleanup leaves the kubelet's KUBE-FIREWALL (as upstream's),
			// which the proxy writes too: the test removes it.
			for _, args := range [][]string{{"-D", "INPUT", "-j", "KUBE-FIREWALL"}, {"-D", "OUTPUT", "-j", "KUBE-FIREWALL"}, {"-F", "KUBE-FIREWALL"}, {"-X", "KUBE-FIREWALL"}} {
				_, _ = legacy(ctx, fam, "", append([]string{"-w", "5", "-t", "filter"}, args...)...)
			}
			out, err := legacy(ctx, fam, "-save")
			if err != nil || strings.Contains(out, "KUBE-") {
				t.Errorf("node1's %s legacy tables after the cleanup (%v): want no KUBE- chain left\n%s", fam, err, out)
			}
		}
	})
	o := defaultOptions()
	o.Name = "kube-proxy-legacy"
	o.Wrapper = []string{"env", env}
	o.ExtraConfig = fmt.Sprintf("iptables:\n  syncPeriod: %s\n", lockSyncPeriod)
	p, err := startHealthy(l, o)
	if err != nil {
		t.Fatalf("starting the proxy on the legacy backend: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		holder.release()
		if err := p.Process.Stop(3 * time.Second); err != nil {
			t.Errorf("stopping the legacy proxy: %v", err)
		}
		if out, err := proxyCommandEnv(ctx, l, p.ConfigPath, env, "--cleanup"); err != nil {
			t.Errorf("kube-proxy --cleanup of the legacy backend's rules: %v\n%s", err, out)
		}
	})
	if out, err := legacy(ctx, v1.IPv4Protocol, "-save", "-t", "nat"); err != nil || !strings.Contains(out, ":KUBE-SERVICES ") {
		t.Fatalf("the proxy did not write the legacy backend (%v)\n%s\n%s", err, out, p.Process.LogTail(40))
	}

	client := l.Node1.Pods[0].NS
	tcp80 := func(s *v1.Service) { s.Spec.Ports = []v1.ServicePort{svcPort("tcp", v1.ProtocolTCP, 80, 80)} }
	stable := createService(ctx, t, l, "xlock-stable", tcp80, lab.PodEndpoints(l.Node2.Pods...), nil)
	victim := createService(ctx, t, l, "xlock-victim", tcp80, lab.PodEndpoints(l.Node2.Pods...), nil)
	toStable := netip.AddrPortFrom(clusterIP(t, stable, v1.IPv4Protocol), 80)
	toVictim := netip.AddrPortFrom(clusterIP(t, victim, v1.IPv4Protocol), 80)
	waitAnswered(ctx, t, p, client, v1.ProtocolTCP, toStable, nil)
	waitAnswered(ctx, t, p, client, v1.ProtocolTCP, toVictim, nil)
	const metric = `kubeproxy_sync_proxy_rules_iptables_restore_failures_total{ip_family="IPv4"}`
	failuresBefore := metricValue(metricsBody(ctx, t, p), metric)
	save := func() string {
		t.Helper()
		out, err := legacy(ctx, v1.IPv4Protocol, "-save")
		if err != nil {
			t.Fatal(err)
		}
		return normalizeSave(out)
	}
	victimChains := func() bool { return strings.Contains(save(), "default/xlock-victim:tcp") }

	// The fault. While the lock is held no restore can run, so the state read
	// now is the previous whole state.
	held := holder.take(t)
	before := save()
	if !victimChains() {
		t.Fatalf("no rule of default/xlock-victim in node1's legacy tables\n%s", before)
	}
	pr := startProberWith(ctx, client, toStable, time.Second)
	deleteService(t, l, victim)
	lockBound := held.Add(lockHeld)
	waitBefore := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if time.Now().After(lockBound) {
				t.Fatalf("within the %s the lock was held: %s did not happen\n%s", lockHeld, what, p.Process.LogTail(40))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitBefore("a failed restore counted in "+metric, func() bool { return metricValue(metricsBody(ctx, t, p), metric) > failuresBefore })
	failedAt := time.Since(held)
	if countInLog(t, p, "holding the xtables lock") == 0 {
		t.Errorf("the proxy's log does not show iptables-restore giving up on the lock (the restore failed for another reason?)\n%s", p.Process.LogTail(40))
	}
	if got := save(); got != before {
		t.Errorf("node1's legacy tables changed although every restore failed:\n--- before\n%s\n--- now\n%s", before, got)
	}
	if res := client.ProbeWith(ctx, lab.Probe{Protocol: v1.ProtocolTCP, Target: toVictim}); res.Outcome != lab.Answered {
		t.Errorf("%s while the lock is held: %s, want the previous state (answered)", flow(client, v1.ProtocolTCP, toVictim), res.Outcome)
	}
	waitBefore("/healthz 503 (the deletion queued for 2 * syncPeriod)", func() bool { return healthzCode(ctx, p) == http.StatusServiceUnavailable })
	unhealthyAt := time.Since(held)
	// The fault lasts lockHeld, whatever the checks took.
	select {
	case <-time.After(time.Until(lockBound)):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	holder.release()
	released := time.Now()

	waitUntil(ctx, t, "a retry programming the deletion of default/xlock-victim (its rules gone from node1's legacy tables)", func() bool { return !victimChains() })
	programmed := time.Since(released)
	waitUntil(ctx, t, "/healthz 200 after the retry", func() bool { return healthzCode(ctx, p) == http.StatusOK })
	waitNotAnswered(ctx, t, p, client, v1.ProtocolTCP, toVictim)
	pr.stop()
	<-pr.done
	failed, probes, longestRun := pr.failures(held)
	t.Logf("lock held %s: first restore failure counted after %s, /healthz 503 after %s; deletion programmed %s after the release; %d restore failures counted",
		lockHeld, failedAt.Round(100*time.Millisecond), unhealthyAt.Round(100*time.Millisecond), programmed.Round(100*time.Millisecond),
		int(metricValue(metricsBody(ctx, t, p), metric)-failuresBefore))
	t.Logf("the unchanged Service answered %d of %d probes while the lock was held and after", probes-failed, probes)
	checkNoOutage(t, p, "the Service that did not change, while the xtables lock was held", failed, probes, longestRun)
}

// requireLegacyLockFile skips t unless the iptables legacy backend is installed
// and honours XTABLES_LOCKFILE (the test must never take the host's lock): the
// binary names the variable, and a command waiting for the lock held on lock
// names that file when it gives up.
func requireLegacyLockFile(t *testing.T, lock string) {
	t.Helper()
	skip := func(format string, args ...any) {
		t.Helper()
		if labtest.Required() {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	for _, bin := range []string{"iptables-legacy", "iptables-legacy-save", "iptables-legacy-restore", "ip6tables-legacy", "ip6tables-legacy-save", "ip6tables-legacy-restore"} {
		if _, err := exec.LookPath(bin); err != nil {
			skip("needs the iptables legacy backend: %v", err)
		}
	}
	path, _ := exec.LookPath("iptables-legacy")
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Contains(b, []byte("XTABLES_LOCKFILE")) {
		skip("%s does not read XTABLES_LOCKFILE (%v): the test would take the host's xtables lock", path, err)
	}
	h := &lockHolder{path: lock}
	h.take(t)
	defer h.release()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// In a namespace of its own: nothing of the host's or the lab's is read.
	out, err := exec.CommandContext(ctx, "unshare", "--net", "env", "XTABLES_LOCKFILE="+lock, "iptables-legacy", "-w", "1", "-t", "filter", "-S").CombinedOutput()
	if err == nil || !strings.Contains(string(out), lock) {
		skip("iptables-legacy does not wait for the lock file XTABLES_LOCKFILE names (%v): %s", err, out)
	}
}

// lockHolder holds an exclusive flock on a lock file, as iptables does.
type lockHolder struct {
	path string
	f    *os.File
}

func (h *lockHolder) take(t *testing.T) time.Time {
	t.Helper()
	f, err := os.OpenFile(h.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		t.Fatalf("taking the lock on %s: %v", h.path, err)
	}
	h.f = f
	return time.Now()
}

// release drops the lock if held (closing the file releases the flock).
func (h *lockHolder) release() {
	if h.f != nil {
		h.f.Close()
		h.f = nil
	}
}

// proxyCommandEnv runs the proxy binary in node1 with configPath, args and the
// environment variable env.
func proxyCommandEnv(ctx context.Context, l *lab.Lab, configPath, env string, args ...string) (string, error) {
	bin, err := proxytest.Binary()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := l.Node1.NS.Command(ctx, "env", append([]string{env, bin, "--config=" + configPath, "-v=2"}, args...)...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// normalizeSave drops what iptables-save prints that changes without a restore:
// its header and footer comments and the chains' packet counters.
func normalizeSave(s string) string {
	counters := regexp.MustCompile(` \[\d+:\d+\]$`)
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		out = append(out, counters.ReplaceAllString(line, ""))
	}
	return strings.Join(out, "\n")
}

// healthzCode is /healthz's status (0 when it does not answer).
func healthzCode(ctx context.Context, p *proxytest.Proxy) int {
	code, _, err := p.Get(ctx, proxytest.HealthzURL)
	if err != nil {
		return 0
	}
	return code
}
