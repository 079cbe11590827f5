package nftables

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/test/lab"
)

// refusalBound bounds how long a counted failure or a successful retry may take:
// the first retry comes 1 s after a failure and the back-off doubles from there.
const refusalBound = 30 * time.Second

// TestRefusedTransaction (issue 16, kernel faults, short version): the kernel
// refuses a sync's transaction, because a rule that is not kproxy's still jumps to
// the chain of a Service being deleted. The previous whole state stays in the
// kernel (the deleted Service still answers), a Service that did not change loses
// no traffic, and the failure is counted in the mode's failure metric. In nftables
// mode the retry, a full sync, rewrites kproxy's own table (the foreign chain in it
// included) and succeeds by itself; in iptables mode the foreign chain is another
// program's and stays, so the retries, with back-off, fail until it is removed,
// and the next one then succeeds.
func TestRefusedTransaction(t *testing.T) {
	skipInIPVSMode(t, "the obstacle is a rule jumping to a per-Service chain, which ipvs mode does not have")
	p := sharedProxy(t)
	l := p.Lab
	ctx := testCtx(t, 3*time.Minute)
	client := l.Node1.Pods[0].NS
	tcp80 := func(s *v1.Service) { s.Spec.Ports = []v1.ServicePort{svcPort("tcp", v1.ProtocolTCP, 80, 80)} }
	stable := createService(ctx, t, l, "refusal-stable", tcp80, lab.PodEndpoints(l.Node2.Pods...), nil)
	victim := createService(ctx, t, l, "refusal-victim", tcp80, lab.PodEndpoints(l.Node2.Pods...), nil)
	toStable := netip.AddrPortFrom(clusterIP(t, stable, v1.IPv4Protocol), 80)
	toVictim := netip.AddrPortFrom(clusterIP(t, victim, v1.IPv4Protocol), 80)
	waitAnswered(ctx, t, p, client, v1.ProtocolTCP, toStable, nil)
	waitAnswered(ctx, t, p, client, v1.ProtocolTCP, toVictim, nil)

	ob := newObstacle(ctx, t, l.Node1.NS, "default/refusal-victim")
	metric := `kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family="IPv4"}`
	if iptablesMode() {
		metric = `kubeproxy_sync_proxy_rules_iptables_restore_failures_total{ip_family="IPv4"}`
	}
	before := metricValue(metricsBody(ctx, t, p), metric)
	ob.place(ctx, t)
	t.Cleanup(func() { ob.remove(context.Background()) })

	t0 := time.Now()
	pr := startProberWith(ctx, client, toStable, time.Second)
	deleteService(t, l, victim)
	waitUntil(ctx, t, "the refused transaction counted in "+metric, func() bool {
		return metricValue(metricsBody(ctx, t, p), metric) > before
	})
	if iptablesMode() {
		// The previous whole state is still there: the deleted Service answers.
		if res := client.ProbeWith(ctx, lab.Probe{Protocol: v1.ProtocolTCP, Target: toVictim}); res.Outcome != lab.Answered {
			t.Errorf("%s after the refused restore: %s, want the previous state (answered)\n%s", flow(client, v1.ProtocolTCP, toVictim), res.Outcome, dumpRules(p))
		}
		ob.remove(ctx)
	}
	waitUntil(ctx, t, "a retry programming the deletion of "+ob.chain, func() bool { return !ob.chainExists(ctx, t) })
	pr.stop()
	<-pr.done
	failed, probes, longestRun := pr.failures(t0)
	t.Logf("the unchanged Service answered %d of %d probes while the transaction was refused and retried", probes-failed, probes)
	checkNoOutage(t, p, "the Service that did not change, while a transaction was refused", failed, probes, longestRun)
}

// obstacle is a chain that is not kproxy's jumping to a per-Service chain of
// kproxy's, which the kernel then refuses to delete.
type obstacle struct {
	ns    *lab.NS
	chain string // kproxy's chain it jumps to
}

const obstacleChain = "REFUSAL-OBSTACLE"

// newObstacle finds the IPv4 per-Service chain of the Service named svc ("ns/name").
func newObstacle(ctx context.Context, t *testing.T, ns *lab.NS, svc string) *obstacle {
	t.Helper()
	ob := &obstacle{ns: ns}
	if iptablesMode() {
		save, err := ns.Run(ctx, lab.IPTablesCommand(v1.IPv4Protocol, "-save"), "-t", "nat")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(save, "\n") {
			if f := strings.Fields(line); strings.HasPrefix(line, "-A KUBE-SERVICES ") && strings.Contains(line, svc+":") && f[len(f)-2] == "-j" {
				ob.chain = f[len(f)-1]
			}
		}
	} else {
		list, err := ns.Run(ctx, "nft", "list", "table", "ip", "kube-proxy")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(list, "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "chain" && strings.HasPrefix(f[1], "service-") && strings.Contains(f[1], svc+"/") {
				ob.chain = f[1]
			}
		}
	}
	if ob.chain == "" {
		t.Fatalf("no per-Service chain of %s in node1\n%s", svc, dumpRules(sharedProxy(t)))
	}
	return ob
}

func (ob *obstacle) place(ctx context.Context, t *testing.T) {
	t.Helper()
	var err error
	if iptablesMode() {
		ipt := lab.IPTablesCommand(v1.IPv4Protocol, "")
		if _, err = ob.ns.Run(ctx, ipt, "-w", "5", "-t", "nat", "-N", obstacleChain); err == nil {
			_, err = ob.ns.Run(ctx, ipt, "-w", "5", "-t", "nat", "-A", obstacleChain, "-j", ob.chain)
		}
	} else {
		_, err = ob.ns.Run(ctx, "nft", fmt.Sprintf("add chain ip kube-proxy %s; add rule ip kube-proxy %s jump %s", obstacleChain, obstacleChain, ob.chain))
	}
	if err != nil {
		t.Fatalf("placing the obstacle to deleting %s: %v", ob.chain, err)
	}
}

// remove deletes the obstacle if it is still there (in nftables mode kproxy's full
// sync has removed it).
func (ob *obstacle) remove(ctx context.Context) {
	if !iptablesMode() {
		return
	}
	ipt := lab.IPTablesCommand(v1.IPv4Protocol, "")
	_, _ = ob.ns.Run(ctx, ipt, "-w", "5", "-t", "nat", "-F", obstacleChain)
	_, _ = ob.ns.Run(ctx, ipt, "-w", "5", "-t", "nat", "-X", obstacleChain)
}

func (ob *obstacle) chainExists(ctx context.Context, t *testing.T) bool {
	t.Helper()
	if iptablesMode() {
		_, err := ob.ns.Run(ctx, lab.IPTablesCommand(v1.IPv4Protocol, ""), "-w", "5", "-t", "nat", "-S", ob.chain)
		return err == nil
	}
	_, err := ob.ns.Run(ctx, "nft", "list", "chain", "ip", "kube-proxy", ob.chain)
	return err == nil
}

// metricValue is the value of the sample key in a /metrics body (0 when absent).
func metricValue(body, key string) float64 {
	f := strings.Fields(metricLine(body, key))
	if len(f) < 2 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[len(f)-1], 64)
	return v
}

// waitUntil polls cond until it holds or refusalBound passes, then fails t saying
// what was awaited.
func waitUntil(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(refusalBound)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("waiting %s for %s\n%s", refusalBound, what, dumpRules(sharedProxy(t)))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
