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
func RunOddData(ctx context.Context, w *World, p bench.Proxy, mode string, cfg OddConfig) (res Result, err error) {
	res = Result{Scenario: "5. odd but valid API data", Proxy: p.Name, Mode: mode}
	if err := w.LoadTo(ctx, cfg.Services); err != nil {
		return res, err
	}
	l := w.Lab
	px, _, err := startSynced(ctx, l, p, mode)
	if err != nil {
		return res, err
	}
	defer func() {
		if serr := stopAndReset(l, px); serr != nil && err == nil {
			err = serr
		}
	}()
	if err := waitAnswering(ctx, append(w.Targets(), w.sampleTargets(cfg.Services, 20)...)); err != nil {
		return res, err
	}
	base, err := w.TakeBaseline(ctx, mode)
	if err != nil {
		return res, err
	}
	res.RSSBefore = rss(px)

	runner := StartProbes(ctx, w.Targets())
	odd := w.OddServices()
	runner.Disrupted()
	created, runErr := w.CreateOdd(ctx, odd)
	var answered []string
	var rssOdd float64
	if runErr == nil {
		runErr = w.canaryAnswers(ctx)
	}
	if runErr == nil {
		rssOdd = rss(px)
		answered = w.oddAnswering(ctx, odd, created)
	}
	runner.Disrupted()
	if derr := w.DeleteOdd(ctx, created); runErr == nil {
		runErr = derr
	}
	if runErr == nil {
		runErr = px.WaitFor(ctx, fmt.Sprintf("the kernel back to %d Service rules", base.Services), answerTimeout, func(ctx context.Context) error {
			n, err := bench.CountServices(ctx, l.Node1.NS, mode)
			if err != nil {
				return err
			}
			if n != base.Services {
				return fmt.Errorf("%d Service rules", n)
			}
			return nil
		})
	}
	if runErr == nil {
		runErr = runner.WaitAnswered(ctx, time.Now(), settleAnswers, answerTimeout)
	}
	stats, err := runner.Stop()
	if err != nil {
		return res, err
	}
	res.Streams = stats
	res.RSSAfter = rss(px)
	res.Notes = fmt.Sprintf("%d other Services; %d odd Services (%s); RSS with them %s; odd Services answering on port 80: %d of %d",
		cfg.Services, len(odd), whats(odd), bench.FmtMiB(rssOdd), len(answered), countAnswers(odd))
	if done, werr := px.Process.Exited(); done {
		res.Lost = fmt.Sprintf("the proxy exited (%v)", werr)
		return res, runErr
	}
	if runErr != nil {
		return res, runErr
	}
	res.Lost = w.Lost(ctx, mode, base, cfg.Services)
	return res, nil
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

// canaryAnswers creates a normal Service after the odd ones, waits until it answers
// (the proxy has programmed everything written before it), and deletes it.
func (w *World) canaryAnswers(ctx context.Context) error {
	svc, err := w.Lab.CreateService(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "rel-canary", Namespace: metav1.NamespaceDefault},
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
	return waitAnswering(ctx, []Target{{Name: "the canary Service created after the odd data", From: w.Client.NS,
		Probe: lab.Probe{Protocol: v1.ProtocolTCP, Target: netip.AddrPortFrom(netip.MustParseAddr(svc.Spec.ClusterIP), 80)}}})
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
