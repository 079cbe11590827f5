package nftables

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/test/lab"
)

// hinted returns the lab's pods as endpoints with hints from hint(pod).
func hinted(pods []*lab.Pod, hint func(p *lab.Pod, ep *lab.Endpoint)) []lab.Endpoint {
	var out []lab.Endpoint
	for _, p := range pods {
		ep := p.Endpoint()
		if hint != nil {
			hint(p, &ep)
		}
		out = append(out, ep)
	}
	return out
}

// TestTopology: topology hints (written as the EndpointSlice controller would for
// trafficDistribution and topology-aware routing) restrict node1 to the hinted
// endpoints when every endpoint has hints; otherwise every endpoint is used.
func TestTopology(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	zoneHints := func(p *lab.Pod, ep *lab.Endpoint) { ep.ForZones = []string{p.Node.Zone} }
	nodeHints := func(p *lab.Pod, ep *lab.Endpoint) {
		ep.ForZones = []string{p.Node.Zone}
		ep.ForNodes = []string{p.Node.Name}
	}
	node1Only := podNames(l.Node1.Pods...)
	all := podNames(l.Pods...)
	cases := []struct {
		name   string
		dist   string // spec.trafficDistribution, "" for none
		annot  bool   // service.kubernetes.io/topology-mode: Auto
		eps    []lab.Endpoint
		expect map[string]bool
		spread bool // probes must reach node2 too
	}{
		{"zone-hints", "", true, hinted(l.Pods, zoneHints), node1Only, false},
		{"prefer-close", v1.ServiceTrafficDistributionPreferClose, false, hinted(l.Pods, zoneHints), node1Only, false},
		{"prefer-same-zone", v1.ServiceTrafficDistributionPreferSameZone, false, hinted(l.Pods, zoneHints), node1Only, false},
		{"prefer-same-node", v1.ServiceTrafficDistributionPreferSameNode, false, hinted(l.Pods, nodeHints), node1Only, false},
		{"partial-hints", "", true, hinted(l.Pods, func(p *lab.Pod, ep *lab.Endpoint) {
			if p.Node == l.Node1 {
				zoneHints(p, ep)
			}
		}), all, true},
		{"no-hint-for-zone", "", true, hinted(l.Pods, func(p *lab.Pod, ep *lab.Endpoint) { ep.ForZones = []string{"zone-x"} }), all, true},
	}
	client := l.Node1.Pods[0].NS
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := testCtx(t, 60*time.Second)
			svc := createService(ctx, t, l, "topo-"+c.name, func(s *v1.Service) {
				if c.dist != "" {
					s.Spec.TrafficDistribution = &c.dist
				}
				if c.annot {
					s.Annotations = map[string]string{v1.AnnotationTopologyMode: "Auto"}
				}
			}, c.eps, nil)
			forEachFamily(t, func(t *testing.T, fam v1.IPFamily) {
				to := netip.AddrPortFrom(clusterIP(t, svc, fam), 80)
				waitAnswered(ctx, t, p, client, v1.ProtocolTCP, to, nil)
				replies := collect(ctx, t, p, client, v1.ProtocolTCP, to, 30)
				onlyFrom(t, flow(client, v1.ProtocolTCP, to), replies, c.expect)
				if c.spread {
					got := answeringPods(replies)
					onNode2 := 0
					for pod, n := range got {
						if strings.HasPrefix(pod, l.Node2.Name+"-") {
							onNode2 += n
						}
					}
					if onNode2 == 0 {
						t.Errorf("%s: 30 probes reached %v, want node2's endpoints too (hints unusable)", flow(client, v1.ProtocolTCP, to), got)
					}
				}
			})
		})
	}
}

// TestTerminatingFallback: when only serving+terminating endpoints are left they
// still answer; ready endpoints are preferred over terminating ones.
func TestTerminatingFallback(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	ctx := testCtx(t, 60*time.Second)
	terminating := func(p *lab.Pod) lab.Endpoint {
		ep := p.Endpoint()
		ep.Ready, ep.Serving, ep.Terminating = false, true, true
		return ep
	}
	onlyTerm := createService(ctx, t, l, "term-only", nil, []lab.Endpoint{terminating(l.Node2.Pods[0]), terminating(l.Node1.Pods[1])}, nil)
	mixed := createService(ctx, t, l, "term-mixed", nil, []lab.Endpoint{terminating(l.Node2.Pods[0]), l.Node2.Pods[1].Endpoint()}, nil)
	notServing := createService(ctx, t, l, "term-notserving", nil, []lab.Endpoint{func() lab.Endpoint {
		ep := terminating(l.Node2.Pods[0])
		ep.Serving = false
		return ep
	}()}, nil)
	client := l.Node1.Pods[0].NS
	forEachFamily(t, func(t *testing.T, fam v1.IPFamily) {
		to := netip.AddrPortFrom(clusterIP(t, onlyTerm, fam), 80)
		waitAnswered(ctx, t, p, client, v1.ProtocolTCP, to, nil)
		replies := collect(ctx, t, p, client, v1.ProtocolTCP, to, 20)
		onlyFrom(t, flow(client, v1.ProtocolTCP, to), replies, podNames(l.Node2.Pods[0], l.Node1.Pods[1]))
		if len(answeringPods(replies)) != 2 {
			t.Errorf("%s: reached %v, want both terminating endpoints", flow(client, v1.ProtocolTCP, to), answeringPods(replies))
		}
		to = netip.AddrPortFrom(clusterIP(t, mixed, fam), 80)
		waitAnswered(ctx, t, p, client, v1.ProtocolTCP, to, nil)
		onlyFrom(t, flow(client, v1.ProtocolTCP, to), collect(ctx, t, p, client, v1.ProtocolTCP, to, 20), podNames(l.Node2.Pods[1]))
		// Terminating and not serving: no usable endpoint, rejected like no endpoints.
		waitOutcome(ctx, t, p, client, v1.ProtocolTCP, netip.AddrPortFrom(clusterIP(t, notServing, fam), 80), lab.Refused)
	})
}
