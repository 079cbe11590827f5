package bench

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/test/lab"
)

// DefaultChangeBound bounds the wait for one change to take effect (Config.ChangeBound
// overrides it); a change not seen by then is recorded at the bound.
const DefaultChangeBound = 30 * time.Second

// ChangeResult holds the latencies of one change series.
type ChangeResult struct {
	Latencies []time.Duration
	// Phases split each latency (same index) where the proxy tells its syncs.
	Phases []ChangePhases
	Capped int
}

// MeasureChanges makes count single-endpoint changes, one at a time, round-robin over
// the churn Services: each replaces the Service's only endpoint by another real pod.
// The latency runs from the EndpointSlice update returning to the first probe from
// client through the ClusterIP answered by the new pod. gap separates a change from the
// previous one taking effect, and the first change from the call (which comes right
// after the initial sync was seen): the proxy's last write must not be less than
// minSyncPeriod before a change, or its rate limit, not its latency, decides the figure.
// A change not seen within bound is recorded at bound (capped).
func MeasureChanges(ctx context.Context, ld *Loader, r *Running, client *lab.Pod, churn []*Svc, count int, gap, bound time.Duration) (ChangeResult, error) {
	logger := klog.FromContext(ctx)
	var res ChangeResult
	if len(churn) == 0 {
		return res, fmt.Errorf("no churn services")
	}
	sw, err := watchSlices(ctx, ld, churn[0].Slice.Namespace)
	if err != nil {
		return res, err
	}
	defer sw.stop()
	src := newSyncSource(ld.Lab)
	for k := range count {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(gap):
		}
		if err := r.Process.ExitReason(); err != nil {
			return res, fmt.Errorf("%s exited (%w); log tail:\n%s", r.Proxy.Name, err, r.Process.LogTail(30))
		}
		s := churn[k%len(churn)]
		next := nextBackend(ld.Backends, s.Pod)
		ch, err := changeOnce(ctx, ld, client, s, next, bound)
		if err != nil {
			return res, err
		}
		lat := ch.answered.Sub(ch.written)
		phases := phasesOf(ctx, sw, src, ch.rv, ch.sent, ch.written, ch.answered)
		if lat >= bound {
			if res.Capped == 0 {
				// Once per series: what the proxy was doing says whether it was slow or stuck.
				logger.Info("Change not seen within the bound", "proxy", r.Proxy.Name, "k", k, "bound", bound, "logTail", r.Process.LogTail(15))
			}
			res.Capped++
		}
		res.Latencies = append(res.Latencies, lat)
		res.Phases = append(res.Phases, phases)
		logger.V(2).Info("Change", "proxy", r.Proxy.Name, "k", k, "service", s.Name, "latency", lat, "phases", phases)
	}
	return res, nil
}

func nextBackend(backends []*lab.Pod, cur *lab.Pod) *lab.Pod {
	for i, p := range backends {
		if p == cur {
			return backends[(i+1)%len(backends)]
		}
	}
	return backends[0]
}

// change is one change's timeline: the update sent, returned with resourceVersion rv,
// and the first probe answered by the new pod (written+bound when none was).
type change struct {
	rv                      string
	sent, written, answered time.Time
}

func changeOnce(ctx context.Context, ld *Loader, client *lab.Pod, s *Svc, next *lab.Pod, bound time.Duration) (change, error) {
	slice := s.Slice.DeepCopy()
	want := lab.BuildEndpointSlices(s.Object, lab.PodEndpoints(next), slice.Ports, lab.SliceOptions{TriggerTime: time.Now()})[0]
	slice.Endpoints = want.Endpoints
	slice.Annotations = want.Annotations
	sent := time.Now()
	got, err := ld.Lab.Client.DiscoveryV1().EndpointSlices(slice.Namespace).Update(ctx, slice, metav1.UpdateOptions{})
	if err != nil {
		return change{}, fmt.Errorf("update slice %s: %w", slice.Name, err)
	}
	written := time.Now()
	ch := change{rv: got.ResourceVersion, sent: sent, written: written}
	s.Slice, s.Pod = got, next
	target := netip.AddrPortFrom(s.ClusterIP, ServicePort)
	for {
		res := client.NS.ProbeWith(ctx, lab.Probe{Protocol: v1.ProtocolTCP, Target: target, Timeout: ProbeTimeout})
		now := time.Now()
		if res.Outcome == lab.Answered && res.Reply.Pod == next.Name {
			ch.answered = now
			return ch, nil
		}
		if now.Sub(written) >= bound {
			ch.answered = written.Add(bound)
			return ch, nil
		}
		if ctx.Err() != nil {
			return change{}, ctx.Err()
		}
		time.Sleep(time.Millisecond)
	}
}
