package reliability

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kproxy/kproxy/bench"
	"github.com/kproxy/kproxy/test/lab"
)

// RefusalConfig sizes scenario 3.
type RefusalConfig struct {
	Services int // bulk Services loaded besides the probe Service
}

// refusalBound bounds the waits of scenario 3 for the Service's chain, and for its
// deletion once the obstacle is gone (a retry after a failed sync comes within
// seconds for kproxy, and after a sync period, 30 s, for upstream).
const refusalBound = 2 * time.Minute

// refusalCountBound bounds the wait for the refusal to be counted. Both proxies
// count it within about a second, except upstream in nftables mode: it deletes a
// stale chain only in the sync after the one that flushed it, and its runner syncs
// on a change or after an hour (syncPeriod is only its retry interval), so with
// nothing else changing it never meets the obstacle.
const refusalCountBound = 30 * time.Second

// obstacleChain is the chain that is not the proxy's, jumping to a per-Service chain.
const obstacleChain = "REL-OBSTACLE"

// The metrics in which either proxy counts a transaction the kernel refused: a sync
// (both proxies, both modes) or, in nftables mode, upstream's separate deletion of
// stale chains, which it makes a second after the sync that flushed them.
var refusalMetrics = []string{
	`kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family="IPv4"}`,
	`kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total{ip_family="IPv4"}`,
	`kubeproxy_sync_proxy_rules_iptables_restore_failures_total{ip_family="IPv4"}`,
}

// RunRefusedTransaction is scenario 3's refused transaction, the same for both
// proxies: a Service is created and programmed, a chain that is not the proxy's is
// made to jump to that Service's chain, and the Service is deleted, so the kernel
// refuses to delete the chain. The probes of the other Services must not fail; the
// refusal must show in a failure metric; once the obstacle is removed (in nftables
// mode kproxy's retry, a full sync, has already removed it with its own table), the
// proxy's retry must delete the Service's chain. The notes say which metric counted
// it, when, and how long the chain outlived the obstacle.
func RunRefusedTransaction(ctx context.Context, w *World, p bench.Proxy, mode string, cfg RefusalConfig) (Result, error) {
	res := Result{Scenario: "3. a transaction refused by the kernel", Proxy: p.Name, Mode: mode}
	err := runScenario(ctx, w, p, mode, cfg.Services, &res, func(r *scenarioRun) (string, error) {
		ns := w.Lab.Node1.NS
		svc, err := w.Lab.CreateService(ctx, &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "rel-refused", Namespace: metav1.NamespaceDefault},
			Spec: v1.ServiceSpec{IPFamilies: []v1.IPFamily{v1.IPv4Protocol}, Ports: []v1.ServicePort{
				{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)}}},
		})
		if err != nil {
			return "", err
		}
		// Deleted below; again here when the body ends early, so that the next run
		// can create it.
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_ = w.Lab.DeleteService(dctx, svc)
		}()
		if _, err := w.Lab.SetEndpoints(ctx, svc, lab.PodEndpoints(w.Bulk.Backends...), nil); err != nil {
			return "", err
		}
		var chain string
		if err := r.px.WaitFor(ctx, "the per-Service chain of default/rel-refused", refusalBound, func(ctx context.Context) (err error) {
			chain, err = serviceChain(ctx, ns, mode, "default/rel-refused")
			return err
		}); err != nil {
			return "", err
		}
		before := refusals(ctx, r)
		if err := placeObstacle(ctx, ns, mode, chain); err != nil {
			return "", err
		}
		defer removeObstacle(context.WithoutCancel(ctx), ns, mode)

		r.runner.Disrupted()
		deleted := time.Now()
		if err := w.Lab.DeleteService(ctx, svc); err != nil {
			return "", err
		}
		var counted string
		if err := r.px.WaitFor(ctx, "the refused transaction counted in a failure metric", refusalCountBound, func(ctx context.Context) error {
			now := refusals(ctx, r)
			for _, m := range refusalMetrics {
				if now[m] > before[m] {
					counted = fmt.Sprintf("%s after %s", shortMetric(m), time.Since(deleted).Round(100*time.Millisecond))
					return nil
				}
			}
			return fmt.Errorf("no failure counted (%v; the Service's chain %s exists: %t, the obstacle: %t)", now, chain,
				chainExists(ctx, ns, mode, chain), chainExists(ctx, ns, mode, obstacleChain))
		}); err != nil {
			return "", err
		}
		obstacleGone := !chainExists(ctx, ns, mode, obstacleChain)
		removeObstacle(ctx, ns, mode)
		removed := time.Now()
		if err := r.px.WaitFor(ctx, "a retry deleting "+chain, refusalBound, func(ctx context.Context) error {
			if chainExists(ctx, ns, mode, chain) {
				return errors.New("still there")
			}
			return nil
		}); err != nil {
			return "", err
		}
		gone := fmt.Sprintf("removed by the test; the Service's chain deleted %s later", time.Since(removed).Round(100*time.Millisecond))
		if obstacleGone {
			gone = "already removed by the proxy's retry (it rewrote its table)"
		}
		return fmt.Sprintf("%d other Services; refusal counted in %s; the obstacle %s", cfg.Services, counted, gone), nil
	})
	return res, err
}

// refusals reads refusalMetrics (a metric not exported yet reads as 0).
func refusals(ctx context.Context, r *scenarioRun) map[string]float64 {
	out := make(map[string]float64, len(refusalMetrics))
	for _, m := range refusalMetrics {
		v, _ := r.px.Metric(ctx, m)
		out[m] = v
	}
	return out
}

func shortMetric(m string) string {
	m = strings.TrimPrefix(m, "kubeproxy_sync_proxy_rules_")
	name, _, _ := strings.Cut(m, "{")
	return name
}

// serviceChain finds the IPv4 per-Service chain of svc ("ns/name") in node1: the
// names are upstream's, which kproxy keeps.
func serviceChain(ctx context.Context, ns *lab.NS, mode, svc string) (string, error) {
	if mode == "iptables" {
		save, err := ns.Run(ctx, lab.IPTablesCommand(v1.IPv4Protocol, "-save"), "-t", "nat")
		if err != nil {
			return "", err
		}
		for line := range strings.Lines(save) {
			if f := strings.Fields(line); strings.HasPrefix(line, "-A KUBE-SERVICES ") && strings.Contains(line, svc+":") && f[len(f)-2] == "-j" {
				return f[len(f)-1], nil
			}
		}
	} else {
		list, err := ns.Run(ctx, "nft", "list", "table", "ip", "kube-proxy")
		if err != nil {
			return "", err
		}
		for line := range strings.Lines(list) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "chain" && strings.HasPrefix(f[1], "service-") && strings.Contains(f[1], svc+"/") {
				return f[1], nil
			}
		}
	}
	return "", fmt.Errorf("no per-Service chain of %s", svc)
}

func placeObstacle(ctx context.Context, ns *lab.NS, mode, chain string) error {
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
	if mode == "iptables" {
		ipt := lab.IPTablesCommand(v1.IPv4Protocol, "")
		_, _ = ns.Run(ctx, ipt, "-w", "5", "-t", "nat", "-F", obstacleChain)
		_, _ = ns.Run(ctx, ipt, "-w", "5", "-t", "nat", "-X", obstacleChain)
		return
	}
	_, _ = ns.Run(ctx, "nft", "delete", "chain", "ip", "kube-proxy", obstacleChain)
}

func chainExists(ctx context.Context, ns *lab.NS, mode, chain string) bool {
	if mode == "iptables" {
		_, err := ns.Run(ctx, lab.IPTablesCommand(v1.IPv4Protocol, ""), "-w", "5", "-t", "nat", "-S", chain)
		return err == nil
	}
	_, err := ns.Run(ctx, "nft", "list", "chain", "ip", "kube-proxy", chain)
	return err == nil
}
