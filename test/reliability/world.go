package reliability

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kproxy/kproxy/bench"
	"github.com/kproxy/kproxy/test/lab"
)

// World is what every scenario probes: the probe Service (NodePort, TCP and UDP port
// 80, on every pod but the client) and the bulk Services (bench.Loader's: one TCP
// port, ten endpoints, every 20th on real pods).
type World struct {
	Lab    *lab.Lab
	Client *lab.Pod // the pod the pod streams probe from (node1's first)
	Probe  *v1.Service
	Bulk   *bench.Loader

	mu sync.Mutex
}

// probeServiceName names the probe Service (bench.Loader's are bench-NNNNN).
const probeServiceName = "rel-probe"

// NewWorld creates the probe Service with its endpoints.
func NewWorld(ctx context.Context, l *lab.Lab) (*World, error) {
	client := l.Node1.Pods[0]
	var backends []*lab.Pod
	for _, p := range l.Pods {
		if p != client {
			backends = append(backends, p)
		}
	}
	svc, err := l.CreateService(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: probeServiceName},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeNodePort,
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports: []v1.ServicePort{
				{Name: "tcp", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)},
				{Name: "udp", Protocol: v1.ProtocolUDP, Port: 80, TargetPort: intstr.FromInt32(80)},
			},
		},
	})
	if err != nil {
		return nil, err
	}
	if _, err := l.SetEndpoints(ctx, svc, lab.PodEndpoints(backends...), nil); err != nil {
		return nil, err
	}
	return &World{
		Lab:    l,
		Client: client,
		Probe:  svc,
		Bulk:   &bench.Loader{Lab: l, Backends: backends, Workers: 32},
	}, nil
}

// LoadTo makes at least n bulk Services exist.
func (w *World) LoadTo(ctx context.Context, n int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.Bulk.LoadTo(ctx, n); err != nil {
		return fmt.Errorf("load %d Services: %w", n, err)
	}
	return nil
}

// Targets are the six probe streams: ClusterIP from the client pod and from node1,
// NodePort (node1's InternalIP) from the external client, TCP and UDP each.
func (w *World) Targets() []Target {
	l := w.Lab
	vip := netip.MustParseAddr(w.Probe.Spec.ClusterIP)
	var out []Target
	for _, proto := range []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP} {
		var np uint16
		for _, p := range w.Probe.Spec.Ports {
			if p.Protocol == proto {
				np = uint16(p.NodePort)
			}
		}
		out = append(out,
			Target{Name: "pod→ClusterIP " + string(proto), From: w.Client.NS, Probe: lab.Probe{Protocol: proto, Target: netip.AddrPortFrom(vip, 80)}},
			Target{Name: "node→ClusterIP " + string(proto), From: l.Node1.NS, Probe: lab.Probe{Protocol: proto, Target: netip.AddrPortFrom(vip, 80)}},
			Target{Name: "external→NodePort " + string(proto), From: l.Ext, Probe: lab.Probe{Protocol: proto, Target: netip.AddrPortFrom(l.Node1.IPs.V4, np)}},
		)
	}
	return out
}

// sampleTargets are TCP probes from the client pod to up to k bulk Services with real
// backends, spread over the first n.
func (w *World) sampleTargets(n, k int) []Target {
	var out []Target
	for _, s := range w.Bulk.Sample(n, k) {
		out = append(out, Target{Name: s.Name, From: w.Client.NS, Probe: lab.Probe{Protocol: v1.ProtocolTCP, Target: netip.AddrPortFrom(s.ClusterIP, bench.ServicePort)}})
	}
	return out
}

// answerTimeout bounds waiting for a target to answer after a proxy (re)start.
const answerTimeout = time.Minute

// waitAnswering waits until every target answers one probe, for at most
// answerTimeout.
func waitAnswering(ctx context.Context, targets []Target) error {
	return waitAnsweringWithin(ctx, targets, answerTimeout)
}

// waitAnsweringWithin is waitAnswering with another bound.
func waitAnsweringWithin(ctx context.Context, targets []Target, answerTimeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, answerTimeout)
	defer cancel()
	for _, t := range targets {
		var last lab.ProbeResult
		for {
			p := t.Probe
			p.Timeout = ProbeTimeout
			if last = t.From.ProbeWith(ctx, p); last.Outcome == lab.Answered {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s (%s %s) to answer: not within %s (last: %s)", t.Name, t.Probe.Protocol, t.Probe.Target, answerTimeout, last)
			case <-time.After(100 * time.Millisecond): // poll interval of a bounded wait
			}
		}
	}
	return nil
}

// Baseline is what the kernel held before a scenario, to tell whether it lost any.
type Baseline struct {
	Services int // bench.CountServices in the run's mode
}

// TakeBaseline counts the Services the kernel in node1 holds in mode.
func (w *World) TakeBaseline(ctx context.Context, mode string) (Baseline, error) {
	n, err := bench.CountServices(ctx, w.Lab.Node1.NS, mode)
	if err != nil {
		return Baseline{}, fmt.Errorf("count Services in the kernel: %w", err)
	}
	return Baseline{Services: n}, nil
}

// Lost reports what is missing after a scenario: a probe target or sampled Service
// that does not answer within answerTimeout, or fewer Service rules than b. Empty
// means nothing was lost.
func (w *World) Lost(ctx context.Context, mode string, b Baseline, bulk int) string {
	if err := waitAnswering(ctx, append(w.Targets(), w.sampleTargets(bulk, 20)...)); err != nil {
		return err.Error()
	}
	n, err := bench.CountServices(ctx, w.Lab.Node1.NS, mode)
	if err != nil {
		return fmt.Sprintf("count Services in the kernel: %v", err)
	}
	if n < b.Services {
		return fmt.Sprintf("the kernel holds %d Service rules, %d before", n, b.Services)
	}
	return ""
}
