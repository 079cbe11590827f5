package reliability

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kproxy/kproxy/bench"
	"github.com/kproxy/kproxy/test/lab"
)

// OddConfig sizes scenario 5.
type OddConfig struct {
	Services int // bulk Services loaded besides the probe Service (the "others")
}

// RunOddData is scenario 5: with the proxy running under probes, the odd Services are
// created, then a normal canary Service, which must answer (the proxy has gone past the
// odd data); then all of them are deleted and the kernel must be back to the Service
// rules it held before. The proxy must not exit, and no probe of the other Services
// fail.
func RunOddData(ctx context.Context, w *World, p bench.Proxy, mode string, cfg OddConfig) (Result, error) {
	res := Result{Scenario: "5. odd but valid API data", Proxy: p.Name, Mode: mode}
	err := runScenario(ctx, w, p, mode, cfg.Services, &res, func(r *scenarioRun) (string, error) {
		odd := w.OddServices()
		r.runner.Disrupted()
		created, runErr := w.CreateOdd(ctx, odd)
		var answered []string
		var rssOdd float64
		if runErr == nil {
			runErr = w.serviceAnswers(ctx, "rel-canary", "the canary Service created after the odd data")
		}
		if runErr == nil {
			rssOdd = rss(r.px)
			answered = w.oddAnswering(ctx, odd, created)
		}
		r.runner.Disrupted()
		if derr := w.DeleteOdd(ctx, created); runErr == nil {
			runErr = derr
		}
		if runErr == nil {
			runErr = r.px.WaitFor(ctx, fmt.Sprintf("the kernel back to %d Service rules", r.base.Services), answerTimeout, func(ctx context.Context) error {
				n, err := bench.CountServices(ctx, w.Lab.Node1.NS, mode)
				if err != nil {
					return err
				}
				if n != r.base.Services {
					return fmt.Errorf("%d Service rules", n)
				}
				return nil
			})
		}
		return fmt.Sprintf("%d other Services; %d odd Services (%s); RSS with them %s; odd Services answering on port 80: %d of %d",
			cfg.Services, len(odd), whats(odd), bench.FmtMiB(rssOdd), len(answered), countAnswers(odd)), runErr
	})
	return res, err
}

func whats(odd []*OddService) string {
	var s []string
	for _, o := range odd {
		s = append(s, o.What)
	}
	return strings.Join(s, "; ")
}

func countAnswers(odd []*OddService) (n int) {
	for _, o := range odd {
		if o.Answers {
			n++
		}
	}
	return n
}

// serviceAnswers creates a normal Service called name (TCP port 80 on the bulk
// Services' backends), waits until it answers from the client pod (the proxy has
// programmed everything written before it), and deletes it; what names it in errors.
func (w *World) serviceAnswers(ctx context.Context, name, what string) error {
	return w.serviceAnswersWithin(ctx, name, what, answerTimeout)
}

// serviceAnswersWithin is serviceAnswers with another bound.
func (w *World) serviceAnswersWithin(ctx context.Context, name, what string, bound time.Duration) error {
	svc, err := w.Lab.CreateService(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Spec: v1.ServiceSpec{IPFamilies: []v1.IPFamily{v1.IPv4Protocol}, Ports: []v1.ServicePort{
			{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)}}},
	})
	if err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = w.Lab.DeleteService(dctx, svc)
	}()
	if _, err := w.Lab.SetEndpoints(ctx, svc, lab.PodEndpoints(w.Bulk.Backends...), nil); err != nil {
		return err
	}
	return waitAnsweringWithin(ctx, []Target{{Name: what, From: w.Client.NS,
		Probe: lab.Probe{Protocol: v1.ProtocolTCP, Target: netip.AddrPortFrom(netip.MustParseAddr(svc.Spec.ClusterIP), 80)}}}, bound)
}

// oddAnswering lists the odd Services with real backends that answer a TCP probe on
// port 80 (informative: the scenario asks only that the others keep working).
func (w *World) oddAnswering(ctx context.Context, odd []*OddService, created []*v1.Service) []string {
	var out []string
	for i, o := range odd {
		if !o.Answers || i >= len(created) {
			continue
		}
		to := netip.AddrPortFrom(netip.MustParseAddr(created[i].Spec.ClusterIP), 80)
		if w.Client.NS.ProbeWith(ctx, lab.Probe{Protocol: v1.ProtocolTCP, Target: to, Timeout: ProbeTimeout}).Outcome == lab.Answered {
			out = append(out, created[i].Name)
		}
	}
	return out
}
