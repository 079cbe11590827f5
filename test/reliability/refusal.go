package reliability

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kproxy/kproxy/bench"
	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
)

// RefusalConfig sizes scenario 3's refused transaction.
type RefusalConfig struct {
	Services int // bulk Services loaded besides the probe Service
}

// Bounds of scenario 3's waits.
const (
	// refusalCountBound bounds the wait for the refusal to be counted. kproxy
	// counts it in the sync that deletes the Service (about a second). Upstream
	// meets it later: in nftables mode it deletes a stale chain at the start of a
	// sync at least a second after the one that flushed it; in iptables mode with
	// more than 1,000 endpoints ("large cluster mode") it deletes stale chains at
	// most once per sync period (30 s in the lab). Both need a sync to happen,
	// which the nudges provide.
	refusalCountBound = 90 * time.Second
	// refusalBound bounds the wait for the Service's chain to appear, and to be
	// deleted once the obstacle is gone (a retry with back-off; upstream's
	// iptables mode retries after a sync period).
	refusalBound = 2 * time.Minute
	// listingTimeout bounds one listing of the kernel's chains: a listing that
	// overruns is an unknown, tried again, never read as "gone".
	listingTimeout = 20 * time.Second
	// nudgeInterval is how often the nudge Service's endpoints change while the
	// scenario waits for the proxy to act on the deletion.
	nudgeInterval = 2 * time.Second
)

// obstacleChain is the chain that is not the proxy's, jumping to a per-Service chain.
const obstacleChain = "REL-OBSTACLE"

// The metrics in which either proxy counts a transaction the kernel refused: a sync
// (both proxies, both modes) or, in nftables mode, upstream's separate deletion of
// stale chains.
var refusalMetrics = []string{
	`kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family="IPv4"}`,
	`kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total{ip_family="IPv4"}`,
	`kubeproxy_sync_proxy_rules_iptables_restore_failures_total{ip_family="IPv4"}`,
}

// RunRefusedTransaction is scenario 3's refused transaction, the same for both
// proxies: a Service is created and programmed, a chain that is not the proxy's is
// made to jump to that Service's per-Service chain (both proxies use upstream's
// names), and the Service is deleted, so the kernel refuses to delete the chain.
// From the deletion on, another Service's endpoints change every nudgeInterval, so
// that a proxy that acts on stale chains only in a later sync (upstream) has syncs
// to do it in. The probes must not fail; the refusal must be counted in a failure
// metric within refusalCountBound; once the obstacle is gone (the test removes it
// unless the proxy's retry did), a retry must delete the Service's chain within
// refusalBound. The notes say which metric counted it and when, what /healthz said
// then, and how long the chain outlived the obstacle.
func RunRefusedTransaction(ctx context.Context, w *World, p bench.Proxy, mode string, cfg RefusalConfig) (Result, error) {
	res := Result{Scenario: fmt.Sprintf("3. a transaction refused by the kernel, %d Services", cfg.Services), Proxy: p.Name, Mode: mode}
	err := runScenario(ctx, w, p, mode, cfg.Services, &res, func(r *scenarioRun) (string, error) {
		return refuse(ctx, w, r, mode)
	})
	return res, err
}

func refuse(ctx context.Context, w *World, r *scenarioRun, mode string) (string, error) {
	ns := w.Lab.Node1.NS
	nudge, err := createScenarioService(ctx, w, "rel-nudge", w.Bulk.Backends[:1])
	if err != nil {
		return "", err
	}
	defer deleteScenarioService(ctx, w, nudge)
	victim, err := createScenarioService(ctx, w, "rel-refused", w.Bulk.Backends)
	if err != nil {
		return "", err
	}
	defer deleteScenarioService(ctx, w, victim)

	var chain string
	if err := r.px.WaitFor(ctx, "the per-Service chain of default/rel-refused", refusalBound, func(ctx context.Context) (err error) {
		chain, err = serviceChain(ctx, ns, mode, "default/rel-refused")
		return err
	}); err != nil {
		return "", err
	}
	before, err := refusals(ctx, r.px)
	if err != nil {
		return "", err
	}
	if err := placeObstacle(ctx, ns, mode, chain); err != nil {
		return "", err
	}
	defer removeObstacle(context.WithoutCancel(ctx), ns, mode)

	r.runner.Disrupted()
	deleted := time.Now()
	if err := w.Lab.DeleteService(ctx, victim); err != nil {
		return "", err
	}
	stopNudges := startNudges(ctx, w, nudge)
	nudgeNote := func() string {
		n, err := stopNudges()
		if err != nil {
			return fmt.Sprintf("; changes of the nudge Service: %d, then: %v", n, err)
		}
		return fmt.Sprintf("; changes of the nudge Service: %d", n)
	}

	var counted, health string
	if err := r.px.WaitFor(ctx, "the refused transaction counted in a failure metric", refusalCountBound, func(ctx context.Context) error {
		now, err := refusals(ctx, r.px)
		if err != nil {
			return err
		}
		for _, m := range refusalMetrics {
			if now[m] > before[m] {
				counted = fmt.Sprintf("%s after %s", shortMetric(m), fmtDur(time.Since(deleted)))
				health = healthz(ctx, r.px)
				return nil
			}
		}
		return fmt.Errorf("no failure counted (%v); %s", now, describeChains(ctx, ns, mode, chain))
	}); err != nil {
		return nudgeNote(), err
	}
	var obstacleGone bool
	if err := r.px.WaitFor(ctx, "a listing of the kernel's chains", refusalBound, func(ctx context.Context) error {
		chains, err := kernelChains(ctx, ns, mode)
		obstacleGone = err == nil && !chains[obstacleChain]
		return err
	}); err != nil {
		return nudgeNote(), err
	}
	removeObstacle(ctx, ns, mode)
	removed := time.Now()
	if err := r.px.WaitFor(ctx, "a retry deleting "+chain, refusalBound, func(ctx context.Context) error {
		chains, err := kernelChains(ctx, ns, mode)
		if err != nil {
			return err
		}
		if chains[chain] {
			return errors.New(chain + " is still there")
		}
		return nil
	}); err != nil {
		return nudgeNote(), err
	}
	gone := fmt.Sprintf("removed by the test; the Service's chain deleted %s later", fmtDur(time.Since(removed)))
	if obstacleGone {
		gone = "already removed by the proxy's retry (it rewrote its table)"
	}
	return fmt.Sprintf("refusal counted in %s (/healthz then: %s); the obstacle %s", counted, health, gone) + nudgeNote(), nil
}

// createScenarioService creates a one-port TCP ClusterIP Service with endpoints on
// pods; deleteScenarioService deletes it (also after ctx ended, so that the next
// run can create it again).
func createScenarioService(ctx context.Context, w *World, name string, pods []*lab.Pod) (*v1.Service, error) {
	svc, err := w.Lab.CreateService(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Spec: v1.ServiceSpec{IPFamilies: []v1.IPFamily{v1.IPv4Protocol}, Ports: []v1.ServicePort{
			{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)}}},
	})
	if err != nil {
		return nil, err
	}
	if _, err := w.Lab.SetEndpoints(ctx, svc, lab.PodEndpoints(pods...), nil); err != nil {
		deleteScenarioService(ctx, w, svc)
		return nil, err
	}
	return svc, nil
}

func deleteScenarioService(ctx context.Context, w *World, svc *v1.Service) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = w.Lab.DeleteService(dctx, svc)
}

// startNudges changes svc's endpoints (one backend, then two, and so on) every
// nudgeInterval until the returned stop is called; stop reports how many changes
// were made and the error that ended them early, if any.
func startNudges(ctx context.Context, w *World, svc *v1.Service) (stop func() (int, error)) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var n int
	var nudgeErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(nudgeInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			pods := w.Bulk.Backends[:1+(n+1)%2]
			if _, err := w.Lab.SetEndpoints(ctx, svc, lab.PodEndpoints(pods...), nil); err != nil {
				if ctx.Err() == nil {
					nudgeErr = fmt.Errorf("changing the endpoints of %s: %w", svc.Name, err)
				}
				return
			}
			n++
		}
	}()
	return func() (int, error) {
		cancel()
		wg.Wait()
		return n, nudgeErr
	}
}

// refusals reads refusalMetrics from one GET of /metrics, which must answer; a
// metric the proxy does not export (upstream's iptables mode has no nftables
// counters) is absent from the map, so it reads as 0.
func refusals(ctx context.Context, px *proxytest.Proxy) (map[string]float64, error) {
	return px.Metrics(ctx, refusalMetrics...)
}

// healthz is /healthz's status code, or the error reading it.
func healthz(ctx context.Context, px *proxytest.Proxy) string {
	code, _, err := px.Get(ctx, proxytest.HealthzURL)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprint(code)
}

func shortMetric(m string) string {
	m = strings.TrimPrefix(m, "kubeproxy_sync_proxy_rules_")
	name, _, _ := strings.Cut(m, "{")
	return name
}

// listTable prints the proxy's IPv4 table in node1 (`iptables-save -t nat` in
// iptables mode, `nft list table ip kube-proxy` in nftables mode), bounded by
// listingTimeout. An error means the listing failed: nothing is known.
func listTable(ctx context.Context, ns *lab.NS, mode string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, listingTimeout)
	defer cancel()
	if mode == "iptables" {
		return ns.Run(ctx, lab.IPTablesCommand(v1.IPv4Protocol, "-save"), "-t", "nat")
	}
	return ns.Run(ctx, "nft", "list", "table", "ip", "kube-proxy")
}

// kernelChains lists the chains of the proxy's IPv4 table in node1 (listTable).
func kernelChains(ctx context.Context, ns *lab.NS, mode string) (map[string]bool, error) {
	list, err := listTable(ctx, ns, mode)
	if err != nil {
		return nil, err
	}
	chains := map[string]bool{}
	for line := range strings.Lines(list) {
		if mode == "iptables" {
			if name, ok := strings.CutPrefix(line, ":"); ok {
				chains[strings.Fields(name)[0]] = true
			}
		} else if f := strings.Fields(line); len(f) >= 3 && f[0] == "chain" && f[2] == "{" {
			chains[f[1]] = true
		}
	}
	return chains, nil
}

// describeChains says whether chain and the obstacle exist, for a wait's error.
func describeChains(ctx context.Context, ns *lab.NS, mode, chain string) string {
	chains, err := kernelChains(ctx, ns, mode)
	if err != nil {
		return "listing the chains: " + err.Error()
	}
	return fmt.Sprintf("%s exists: %t, the obstacle: %t", chain, chains[chain], chains[obstacleChain])
}

// serviceChain finds the IPv4 per-Service chain of svc ("ns/name") in node1.
func serviceChain(ctx context.Context, ns *lab.NS, mode, svc string) (string, error) {
	if mode == "iptables" {
		save, err := listTable(ctx, ns, mode)
		if err != nil {
			return "", err
		}
		for line := range strings.Lines(save) {
			if f := strings.Fields(line); strings.HasPrefix(line, "-A KUBE-SERVICES ") && strings.Contains(line, svc+":") && f[len(f)-2] == "-j" {
				return f[len(f)-1], nil
			}
		}
		return "", fmt.Errorf("no jump to the per-Service chain of %s in KUBE-SERVICES", svc)
	}
	chains, err := kernelChains(ctx, ns, mode)
	if err != nil {
		return "", err
	}
	for c := range chains {
		if strings.HasPrefix(c, "service-") && strings.Contains(c, "-"+svc+"/") {
			return c, nil
		}
	}
	return "", fmt.Errorf("no per-Service chain of %s", svc)
}

func placeObstacle(ctx context.Context, ns *lab.NS, mode, chain string) error {
	ctx, cancel := context.WithTimeout(ctx, listingTimeout)
	defer cancel()
	var err error
	if mode == "iptables" {
		ipt := lab.IPTablesCommand(v1.IPv4Protocol, "")
		if _, err = ns.Run(ctx, ipt, "-w", "5", "-t", "nat", "-N", obstacleChain); err == nil {
			_, err = ns.Run(ctx, ipt, "-w", "5", "-t", "nat", "-A", obstacleChain, "-j", chain)
		}
	} else {
		_, err = ns.Run(ctx, "nft", fmt.Sprintf("add chain ip kube-proxy %s; add rule ip kube-proxy %s jump %s", obstacleChain, obstacleChain, chain))
	}
	if err != nil {
		return fmt.Errorf("placing the obstacle to deleting %s: %w", chain, err)
	}
	return nil
}

// removeObstacle deletes the obstacle if it is still there.
func removeObstacle(ctx context.Context, ns *lab.NS, mode string) {
	ctx, cancel := context.WithTimeout(ctx, listingTimeout)
	defer cancel()
	if mode == "iptables" {
		ipt := lab.IPTablesCommand(v1.IPv4Protocol, "")
		_, _ = ns.Run(ctx, ipt, "-w", "5", "-t", "nat", "-F", obstacleChain)
		_, _ = ns.Run(ctx, ipt, "-w", "5", "-t", "nat", "-X", obstacleChain)
		return
	}
	_, _ = ns.Run(ctx, "nft", "delete", "chain", "ip", "kube-proxy", obstacleChain)
}
