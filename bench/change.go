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
		ch, err := ld.ChangeEndpoint(ctx, client, s, bound, changePoll)
		if err != nil {
			return res, err
		}
		lat := ch.Latency()
		phases := phasesOf(ctx, sw, src, ch.RV, ch.Sent, ch.Written, ch.Answered)
		if ch.Capped {
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

// changePoll is how often MeasureChanges probes for a change's new endpoint: the
// resolution of its latencies (the probe itself takes a fraction of a millisecond).
const changePoll = time.Millisecond

// Change is one endpoint change's timeline: the update sent, returned with
// resourceVersion RV, and the first probe answered by the new pod (Written+bound, and
// Capped, when none was within the bound).
type Change struct {
	Service                 string
	RV                      string
	Sent, Written, Answered time.Time
	Capped                  bool
}

// Latency is the change-to-programmed latency: from the update returning to the first
// probe through the ClusterIP answered by the new endpoint.
func (c Change) Latency() time.Duration { return c.Answered.Sub(c.Written) }

// ChangeEndpoint replaces the only endpoint of churn Service s (IsChurn) by the next
// real pod, and probes s's ClusterIP from client every poll until the new pod answers,
// for at most bound after the update returned. It is the change the bench's change
// latency (MeasureChanges) and the reliability soak (test/reliability) measure; s must
// not be changed by anyone else meanwhile.
func (ld *Loader) ChangeEndpoint(ctx context.Context, client *lab.Pod, s *Svc, bound, poll time.Duration) (Change, error) {
	next := nextBackend(ld.Backends, s.Pod)
	slice := s.Slice.DeepCopy()
	want := lab.BuildEndpointSlices(s.Object, lab.PodEndpoints(next), slice.Ports, lab.SliceOptions{TriggerTime: time.Now()})[0]
	slice.Endpoints = want.Endpoints
	slice.Annotations = want.Annotations
	sent := time.Now()
	got, err := ld.Lab.Client.DiscoveryV1().EndpointSlices(slice.Namespace).Update(ctx, slice, metav1.UpdateOptions{})
	if err != nil {
		return Change{}, fmt.Errorf("update slice %s: %w", slice.Name, err)
	}
	written := time.Now()
	ch := Change{Service: s.Name, RV: got.ResourceVersion, Sent: sent, Written: written}
	s.Slice, s.Pod = got, next
	target := netip.AddrPortFrom(s.ClusterIP, ServicePort)
	for {
		res := client.NS.ProbeWith(ctx, lab.Probe{Protocol: v1.ProtocolTCP, Target: target, Timeout: ProbeTimeout})
		now := time.Now()
		if res.Outcome == lab.Answered && res.Reply.Pod == next.Name {
			ch.Answered = now
			return ch, nil
		}
		if now.Sub(written) >= bound {
			ch.Answered, ch.Capped = written.Add(bound), true
			return ch, nil
		}
		select {
		case <-ctx.Done():
			return Change{}, ctx.Err()
		case <-time.After(poll): // the probes' pace while the change is not seen
		}
	}
}
