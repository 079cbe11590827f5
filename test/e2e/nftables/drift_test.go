package nftables

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/inspect"
	"github.com/kproxy/kproxy/internal/ipvs"
	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
	"github.com/kproxy/kproxy/test/vm"
)

// The proxy's promises about a third party changing its rules (issue 14): a deleted
// nftables table is rewritten within a second; anything else (a flushed chain, a
// flushed map, iptables' KUBE-SERVICES flushed, an IPVS virtual server deleted)
// within one sync period (the lab runs the default, 30 s) plus the drift timer's
// second and a sync.
const (
	deletedTableBound = time.Second
	driftBound        = 30*time.Second + 3*time.Second
)

// driftBoundHere is driftBound with, in the 6.1 VM, 10 s more: under its emulated
// CPU the comparison's listing (ipset save and iptables-save are processes there)
// and the repairing full sync take seconds, and in ipvs mode traffic came back
// 31.8 s after a virtual server's deletion that fell just after a check.
func driftBoundHere() time.Duration {
	if vm.InVM() {
		return driftBound + 10*time.Second
	}
	return driftBound
}

// TestDrift: a third party changes the proxy's rules under continuous probes;
// `kube-proxy verify` lists the change, the proxy reports and repairs it within its
// bound, and the probes say when traffic came back.
func TestDrift(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	ctx := testCtx(t, 3*time.Minute)
	svc := createService(ctx, t, l, "drift", nil, lab.PodEndpoints(l.Node2.Pods...), nil)
	client := l.Node1.Pods[0].NS
	to := netip.AddrPortFrom(clusterIP(t, svc, v1.IPv4Protocol), 80)
	waitAnswered(ctx, t, p, client, v1.ProtocolTCP, to, nil)
	waitVerified(ctx, t, p)
	if line := metricLine(metricsBody(ctx, t, p), `kubeproxy_kproxy_drift_repairs_total{ip_family="IPv4"}`); line != "" {
		t.Fatalf("a drift repair before any third party changed the rules: %q", line)
	}

	if iptablesMode() {
		t.Run("KUBE-SERVICES flushed", func(t *testing.T) {
			pr := startProber(ctx, client, to)
			t0 := time.Now()
			flushed := false
			for _, ipt := range []string{"iptables-nft", "iptables-legacy"} {
				if _, err := l.Node1.NS.Run(ctx, ipt, "-w", "5", "-t", "nat", "-F", "KUBE-SERVICES"); err == nil {
					flushed = true
				}
			}
			if !flushed {
				t.Fatal("no iptables backend could flush nat KUBE-SERVICES")
			}
			expectDifference(ctx, t, p, "rule", "nat KUBE-SERVICES")
			restored := pr.waitRestored(ctx, t, t0, driftBoundHere())
			t.Logf("KUBE-SERVICES flushed: traffic back after %s (bound %s); %s", restored.Round(time.Millisecond), driftBoundHere(), pr.summary(t0))
			waitRepairReported(ctx, t, p)
			waitVerified(ctx, t, p)
		})
		return
	}

	if ipvsMode() {
		t.Run("set entry deleted, then virtual server deleted", func(t *testing.T) {
			// A set entry deleted (the ClusterIP's masquerade no longer matches)
			// is found by `kube-proxy verify`; the virtual server's deletion,
			// as `ipvsadm -D` would, stops the traffic until the periodic
			// check's full sync repairs both.
			entry := to.Addr().String() + ",tcp:80"
			if _, err := l.Node1.NS.Run(ctx, "ipset", "del", "KUBE-CLUSTER-IP", entry); err != nil {
				t.Fatal(err)
			}
			expectDifference(ctx, t, p, "element", "KUBE-CLUSTER-IP")

			h := ipvs.New(l.Node1.NS.Path())
			defer func() { _ = h.Close() }()
			pr := startProber(ctx, client, to)
			t0 := time.Now()
			if err := h.DeleteVirtualServer(ipvs.Key{Address: to.Addr(), Protocol: v1.ProtocolTCP, Port: to.Port()}); err != nil {
				t.Fatal(err)
			}
			expectDifference(ctx, t, p, "virtual server", "TCP "+to.String())
			restored := pr.waitRestored(ctx, t, t0, driftBoundHere())
			t.Logf("virtual server deleted: traffic back after %s (bound %s); %s", restored.Round(time.Millisecond), driftBoundHere(), pr.summary(t0))
			waitRepairReported(ctx, t, p)
			waitVerified(ctx, t, p)
		})
		return
	}

	t.Run("map flushed, then table deleted", func(t *testing.T) {
		// A flushed map is found by `kube-proxy verify` (and repaired by the next
		// periodic check; the table's deletion below repairs it sooner).
		if _, err := l.Node1.NS.Run(ctx, "nft", "flush", "map", "ip", "kube-proxy", "service-ips"); err != nil {
			t.Fatal(err)
		}
		expectDifference(ctx, t, p, "element", "service-ips")

		pr := startProber(ctx, client, to)
		t0 := time.Now()
		if _, err := l.Node1.NS.Run(ctx, "nft", "delete", "table", "ip", "kube-proxy"); err != nil {
			t.Fatal(err)
		}
		restored := pr.waitRestored(ctx, t, t0, 10*time.Second)
		t.Logf("table deleted: traffic back after %s (bound %s); %s", restored.Round(time.Millisecond), deletedTableBound, pr.summary(t0))
		if restored > deletedTableBound {
			t.Errorf("traffic came back %s after the table was deleted, want at most %s", restored, deletedTableBound)
		}
		waitRepairReported(ctx, t, p)
		waitVerified(ctx, t, p)
	})
}

// verify runs `kube-proxy verify -o json` in node1 and returns its document and
// exit code (0: no difference, 2: differences).
func verify(ctx context.Context, p *proxytest.Proxy) (*inspect.Verification, int, error) {
	bin, err := proxytest.Binary()
	if err != nil {
		return nil, 0, err
	}
	out, err := p.Lab.Node1.NS.Command(ctx, bin, "verify", "-o", "json").Output()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		return nil, 0, err
	}
	var doc inspect.Verification
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, code, fmt.Errorf("decoding kube-proxy verify's output (exit %d): %w: %s", code, err, out)
	}
	return &doc, code, nil
}

// waitVerified waits until `kube-proxy verify` finds no difference in any family.
func waitVerified(ctx context.Context, t *testing.T, p *proxytest.Proxy) {
	t.Helper()
	err := p.WaitFor(ctx, "kube-proxy verify without differences", syncTimeout, func(ctx context.Context) error {
		doc, code, err := verify(ctx, p)
		if err != nil {
			return err
		}
		for _, f := range doc.Families {
			if f.Error != "" {
				return fmt.Errorf("%s: %s", f.Family, f.Error)
			}
		}
		if code != 0 || doc.Differences() != 0 {
			return fmt.Errorf("exit %d, %d differences: %+v", code, doc.Differences(), doc.Families)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// expectDifference runs `kube-proxy verify` until it exits 2 listing a difference
// of kind in name (IPv4), which it must do right away: the third party already
// acted (a few tries allow for a sync in progress).
func expectDifference(ctx context.Context, t *testing.T, p *proxytest.Proxy, kind, name string) {
	t.Helper()
	err := p.WaitFor(ctx, fmt.Sprintf("kube-proxy verify listing the %s %s", kind, name), 5*time.Second, func(ctx context.Context) error {
		doc, code, err := verify(ctx, p)
		if err != nil {
			return err
		}
		if code != 2 {
			return fmt.Errorf("exit %d, want 2", code)
		}
		for _, f := range doc.Families {
			for _, d := range f.Differences {
				if f.Family == "IPv4" && d.Kind == kind && d.Name == name {
					return nil
				}
			}
		}
		return fmt.Errorf("differences: %+v", doc.Families)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitRepairReported waits until the IPv4 repair shows in the metrics.
func waitRepairReported(ctx context.Context, t *testing.T, p *proxytest.Proxy) {
	t.Helper()
	waitMetrics(ctx, t, p, "the drift repair in /metrics", map[string]metricCheck{
		`kubeproxy_kproxy_drift_repairs_total{ip_family="IPv4"}`: atLeast(1),
		`kubeproxy_kproxy_drift_objects{ip_family="IPv4"}`:       present,
	})
}

func metricsBody(ctx context.Context, t *testing.T, p *proxytest.Proxy) string {
	t.Helper()
	code, body, err := p.Get(ctx, proxytest.MetricsURL)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics: %d, %v", code, err)
	}
	return body
}

// prober sends a new TCP connection to a target every proberInterval and keeps
// what became of each.
type prober struct {
	mu      sync.Mutex
	results []probeAt
	stop    context.CancelFunc
	done    chan struct{}
}

// failures counts the probes started after t0 that did not answer, of how many,
// and the longest run of them in a row (by start time).
func (pr *prober) failures(t0 time.Time) (failed, total, longestRun int) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	run := 0
	for _, r := range pr.sorted() {
		if r.start.Before(t0) {
			continue
		}
		total++
		if r.res.Outcome == lab.Answered {
			run = 0
			continue
		}
		failed++
		run++
		longestRun = max(longestRun, run)
	}
	return failed, total, longestRun
}

type probeAt struct {
	start time.Time
	res   lab.ProbeResult
}

const (
	proberInterval = 50 * time.Millisecond
	// proberTimeout is short so that a lost probe is known quickly.
	proberTimeout = 300 * time.Millisecond
)

func startProber(ctx context.Context, from *lab.NS, to netip.AddrPort) *prober {
	return startProberWith(ctx, from, to, proberTimeout)
}

// startProberWith probes to from from every proberInterval, each probe bounded by
// timeout, until stopped.
func startProberWith(ctx context.Context, from *lab.NS, to netip.AddrPort, timeout time.Duration) *prober {
	ctx, cancel := context.WithCancel(ctx)
	pr := &prober{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(pr.done)
		tick := time.NewTicker(proberInterval)
		defer tick.Stop()
		var wg sync.WaitGroup
		defer wg.Wait()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			wg.Add(1)
			go func(start time.Time) {
				defer wg.Done()
				res := from.ProbeWith(ctx, lab.Probe{Protocol: v1.ProtocolTCP, Target: to, Timeout: timeout})
				if ctx.Err() != nil {
					return
				}
				pr.mu.Lock()
				pr.results = append(pr.results, probeAt{start, res})
				pr.mu.Unlock()
			}(time.Now())
		}
	}()
	return pr
}

// waitRestored waits (at most bound past t0, plus the probe timeout) until the
// probes started after some moment all answered for a second, stops the prober,
// and returns when traffic came back: the start of the first probe after t0 from
// which every later probe answered.
func (pr *prober) waitRestored(ctx context.Context, t *testing.T, t0 time.Time, bound time.Duration) time.Duration {
	t.Helper()
	deadline := t0.Add(bound + proberTimeout + time.Second)
	for {
		if back, ok := pr.backSince(t0); ok && time.Since(back) > time.Second {
			pr.stop()
			<-pr.done
			return back.Sub(t0)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			pr.stop()
			<-pr.done
			t.Fatalf("traffic did not come back within %s of the change; %s", bound, pr.summary(t0))
		}
		time.Sleep(proberInterval)
	}
}

// backSince returns the start of the first probe after t0 from which every
// probe that ended answered; ok is false while the last one failed.
func (pr *prober) backSince(t0 time.Time) (time.Time, bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var back time.Time
	ok := false
	for _, r := range pr.sorted() {
		if r.start.Before(t0) {
			continue
		}
		if r.res.Outcome != lab.Answered {
			ok = false
			continue
		}
		if !ok {
			back, ok = r.start, true
		}
	}
	return back, ok
}

// sorted returns the results by start time (they end out of order).
func (pr *prober) sorted() []probeAt {
	out := slices.Clone(pr.results)
	slices.SortFunc(out, func(a, b probeAt) int { return a.start.Compare(b.start) })
	return out
}

// summary counts the probes started after t0 by outcome.
func (pr *prober) summary(t0 time.Time) string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	counts := map[lab.Outcome]int{}
	n := 0
	for _, r := range pr.results {
		if !r.start.Before(t0) {
			counts[r.res.Outcome]++
			n++
		}
	}
	parts := []string{strconv.Itoa(n) + " probes"}
	for o, c := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", c, o))
	}
	return strings.Join(parts, ", ")
}
