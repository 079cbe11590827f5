package nftables

import (
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
)

// ChurnDurationEnv lengthens TestChurn (a Go duration; 10s by default), which
// `make test` also runs against the daemon built with -race (issue 16).
const ChurnDurationEnv = "KPROXY_E2E_CHURN_DURATION"

// Churn's shape: churnServices Services changed in turn, churnRate changes per second
// in all, while a Service that never changes is probed every proberInterval.
const (
	churnServices = 20
	churnRate     = 50
)

// TestChurn: while Services change churnRate times a second (their endpoints
// replaced, every fifth change a port moved), a Service that does not change has
// no outage for a pod probing it (no two probes in a row fail, at most 1% do), and
// once the churn stops every churned Service
// answers from its last endpoints on its last port. Under the daemon built with
// -race this is where concurrent paths meet (informer handlers, the sync loop,
// drift checks, the state API that the test does not read but the proxy serves).
func TestChurn(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	duration := 10 * time.Second
	if v := os.Getenv(ChurnDurationEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", ChurnDurationEnv, v, err)
		}
		duration = d
	}
	ctx := testCtx(t, duration+3*time.Minute)
	client := l.Node1.Pods[0].NS
	stable := createService(ctx, t, l, "churn-stable", func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{svcPort("tcp", v1.ProtocolTCP, 80, 80)}
	}, lab.PodEndpoints(l.Node2.Pods...), nil)
	stableTo := netip.AddrPortFrom(clusterIP(t, stable, v1.IPv4Protocol), 80)
	waitAnswered(ctx, t, p, client, v1.ProtocolTCP, stableTo, nil)

	// Two endpoint sets to alternate between, each answering for itself.
	sets := [][]*lab.Pod{{l.Node1.Pods[1], l.Node2.Pods[0]}, {l.Node2.Pods[1]}}
	svcs := make([]*v1.Service, churnServices)
	for i := range svcs {
		svcs[i] = createService(ctx, t, l, fmt.Sprintf("churn-%d", i), func(s *v1.Service) {
			s.Spec.Ports = []v1.ServicePort{svcPort("tcp", v1.ProtocolTCP, 80, 80)}
		}, lab.PodEndpoints(sets[0]...), nil)
	}

	// The probes of the stable Service, for the whole churn (each bounded by a
	// second: a lost SYN is retransmitted after one).
	t0 := time.Now()
	pr := startProberWith(ctx, client, stableTo, time.Second)

	// The churn: change k goes to Service k mod churnServices.
	final := make([]int, len(svcs)) // the endpoint set each Service has last
	port := make([]int32, len(svcs))
	for i := range port {
		port[i] = 80
	}
	tick := time.NewTicker(time.Second / churnRate)
	deadline := time.Now().Add(duration)
	changes := 0
	for time.Now().Before(deadline) {
		<-tick.C
		i := changes % len(svcs)
		if changes%5 == 4 {
			port[i] = 161 - port[i] // 80 <-> 81
			updated, err := l.UpdateService(ctx, svcs[i].Name, func(s *v1.Service) { s.Spec.Ports[0].Port = port[i] })
			if err != nil {
				t.Fatalf("change %d: moving the port of %s: %v", changes, svcs[i].Name, err)
			}
			svcs[i] = updated
		} else {
			final[i] = 1 - final[i]
			setEndpoints(ctx, t, l, svcs[i], lab.PodEndpoints(sets[final[i]]...), nil)
		}
		changes++
	}
	tick.Stop()
	pr.stop()
	<-pr.done
	failed, probes, longestRun := pr.failures(t0)
	t.Logf("%d changes in %s; the stable Service answered %d of %d probes (longest run of failures: %d)", changes, duration, probes-failed, probes, longestRun)
	checkNoOutage(t, p, "the Service that did not change, during the churn", failed, probes, longestRun)
	if want := int(duration/proberInterval) / 2; probes < want {
		t.Errorf("only %d probes in %s, want about %d a second: the prober was starved", probes, duration, time.Second/proberInterval)
	}
	for i, svc := range svcs {
		to := netip.AddrPortFrom(clusterIP(t, svc, v1.IPv4Protocol), uint16(port[i]))
		names := make([]string, 0, len(sets[final[i]]))
		for _, pod := range sets[final[i]] {
			names = append(names, pod.Name)
		}
		waitAnswered(ctx, t, p, client, v1.ProtocolTCP, to, podIs(names...))
	}
}

// checkNoOutage fails t when probes of what must not be disturbed show an outage.
// A lone failed probe is not one: on a loaded 2-core machine the probing goroutine
// itself can be descheduled past its 1 s connect timeout (seen with the -race
// daemon beside two emulated VMs). Two in a row, or more than 1% of them, is one.
func checkNoOutage(t *testing.T, p *proxytest.Proxy, what string, failed, probes, longestRun int) {
	t.Helper()
	if longestRun > 1 || failed*100 > probes {
		t.Errorf("%s: %d of %d probes failed, %d in a row\n%s", what, failed, probes, longestRun, dumpRules(p))
	}
}
