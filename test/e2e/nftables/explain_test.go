package nftables

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kproxy/kproxy/internal/inspect"
	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
)

// explain runs `kube-proxy explain service NS/NAME -o json` in node1, where the proxy
// runs, as an operator would with kubectl exec, and decodes its output.
func explain(ctx context.Context, p *proxytest.Proxy, svc *v1.Service) (*inspect.Service, error) {
	bin, err := proxytest.Binary()
	if err != nil {
		return nil, err
	}
	out, err := p.Lab.Node1.NS.Run(ctx, bin, "explain", "service", svc.Namespace+"/"+svc.Name, "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("kube-proxy explain: %w: %s", err, out)
	}
	var doc inspect.Service
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, fmt.Errorf("decoding kube-proxy explain's output: %w: %s", err, out)
	}
	return &doc, nil
}

// waitExplained waits until explain shows every port of svc in both families with
// n endpoints each, and returns it.
func waitExplained(ctx context.Context, t *testing.T, p *proxytest.Proxy, svc *v1.Service, n int) *inspect.Service {
	t.Helper()
	var doc *inspect.Service
	err := p.WaitFor(ctx, fmt.Sprintf("explain of %s with %d endpoints per family", svc.Name, n), syncTimeout, func(ctx context.Context) error {
		d, err := explain(ctx, p, svc)
		if err != nil {
			return err
		}
		if len(d.Ports) != 2*len(svc.Spec.Ports) {
			return fmt.Errorf("%d ports", len(d.Ports))
		}
		for _, port := range d.Ports {
			if len(port.Endpoints) != n {
				return fmt.Errorf("%s port %s: %d endpoints", port.Family, port.Name, len(port.Endpoints))
			}
		}
		doc = d
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// endpointUse is the use of one endpoint for each traffic source, as the test
// expects it: internal, external, external from the node.
type endpointUse struct{ internal, external, fromNode string }

// checkUses compares each endpoint's uses, by the pod that owns the address, in
// every port of doc.
func checkUses(t *testing.T, doc *inspect.Service, owner map[netip.Addr]string, want map[string]endpointUse) {
	t.Helper()
	for _, port := range doc.Ports {
		for _, ep := range port.Endpoints {
			pod := owner[netip.MustParseAddrPort(ep.Address).Addr()]
			w, ok := want[pod]
			if !ok {
				t.Errorf("%s %s: endpoint %s (pod %q) not expected", port.Family, port.Name, ep.Address, pod)
				continue
			}
			got := endpointUse{ep.Internal, ep.External, ep.ExternalFromNode}
			if got != w {
				t.Errorf("%s %s: endpoint %s (pod %s): internal/external/from node = %v, want %v", port.Family, port.Name, ep.Address, pod, got, w)
			}
		}
		if len(port.KernelObjects) == 0 {
			t.Errorf("%s %s: no kernel objects", port.Family, port.Name)
		}
	}
}

// TestExplain: `kube-proxy explain service` gives the right reason for every way an
// endpoint can be left out, and names the endpoints real packets reach and the
// verdicts they get.
func TestExplain(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	if len(l.Node1.Pods) < 2 || len(l.Node2.Pods) < 2 {
		t.Fatalf("the lab needs two pods per node, has %d and %d", len(l.Node1.Pods), len(l.Node2.Pods))
	}
	owner := map[netip.Addr]string{}
	for _, pod := range l.Pods {
		for _, ip := range pod.Endpoint().IPs {
			owner[ip] = pod.Name
		}
	}
	local, localTerm := l.Node1.Pods[0], l.Node1.Pods[1]
	remote, remoteNotReady := l.Node2.Pods[0], l.Node2.Pods[1]
	eps := func(zoneHints bool) []lab.Endpoint {
		out := []lab.Endpoint{local.Endpoint(), localTerm.Endpoint(), remote.Endpoint(), remoteNotReady.Endpoint()}
		out[1].Ready, out[1].Terminating = false, true
		out[3].Ready, out[3].Serving = false, false
		if zoneHints {
			for i := range out {
				out[i].ForZones = []string{out[i].Zone}
			}
		}
		return out
	}
	client := l.Node1.Pods[0].NS
	const (
		used     = inspect.Used
		notLocal = "NotOnThisNode"
		term     = "TerminatingWithReadyEndpoints"
		notReady = "NotReady"
		noExt    = "NotExternallyAccessible"
	)

	t.Run("external-policy-local", func(t *testing.T) {
		ctx := testCtx(t, 90*time.Second)
		svc := createService(ctx, t, l, "explain-etp-local", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		}, eps(false), nil)
		doc := waitExplained(ctx, t, p, svc, 4)
		checkUses(t, doc, owner, map[string]endpointUse{
			local.Name:     {used, used, used},
			localTerm.Name: {term, term, term},
			remote.Name:    {used, notLocal, used},
			// The Local selection checks the node before the conditions.
			remoteNotReady.Name: {notReady, notLocal, notReady},
		})
		for _, port := range doc.Ports {
			if port.External == nil || port.External.Verdict != inspect.VerdictForward || !port.External.ShortCircuit || port.External.Masquerade {
				t.Errorf("%s: external traffic %+v, want forwarded, short-circuited, not masqueraded", port.Family, port.External)
			}
		}
		checkAnsweredBy(ctx, t, p, client, svc, doc)
	})

	t.Run("internal-policy-local", func(t *testing.T) {
		ctx := testCtx(t, 90*time.Second)
		svc := createService(ctx, t, l, "explain-itp-local", func(s *v1.Service) {
			s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
		}, eps(false), nil)
		doc := waitExplained(ctx, t, p, svc, 4)
		checkUses(t, doc, owner, map[string]endpointUse{
			local.Name:          {used, noExt, noExt},
			localTerm.Name:      {term, noExt, noExt},
			remote.Name:         {notLocal, noExt, noExt},
			remoteNotReady.Name: {notLocal, noExt, noExt},
		})
		checkAnsweredBy(ctx, t, p, client, svc, doc)
	})

	t.Run("zone-hints", func(t *testing.T) {
		ctx := testCtx(t, 90*time.Second)
		svc := createService(ctx, t, l, "explain-zones", nil, eps(true), nil)
		doc := waitExplained(ctx, t, p, svc, 4)
		checkUses(t, doc, owner, map[string]endpointUse{
			local.Name:          {used, noExt, noExt},
			localTerm.Name:      {term, noExt, noExt},
			remote.Name:         {"HintsForOtherZone", noExt, noExt},
			remoteNotReady.Name: {notReady, noExt, noExt},
		})
		checkAnsweredBy(ctx, t, p, client, svc, doc)
	})

	t.Run("no-endpoints", func(t *testing.T) {
		ctx := testCtx(t, 90*time.Second)
		svc := createService(ctx, t, l, "explain-empty", nil, nil, nil)
		doc := waitExplained(ctx, t, p, svc, 0)
		for _, port := range doc.Ports {
			if port.Internal.Verdict != inspect.VerdictReject {
				t.Errorf("%s: internal verdict %q, want %q", port.Family, port.Internal.Verdict, inspect.VerdictReject)
			}
			to := netip.AddrPortFrom(netip.MustParseAddr(port.ClusterIP), uint16(port.Port))
			waitOutcome(ctx, t, p, client, v1.ProtocolTCP, to, lab.Refused)
		}
	})

	t.Run("table", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		bin, err := proxytest.Binary()
		if err != nil {
			t.Fatal(err)
		}
		out, err := l.Node1.NS.Run(ctx, bin, "explain", "node")
		if err != nil || !strings.Contains(out, "Node "+l.Node1.Name+", mode "+proxyMode()) {
			t.Errorf("kube-proxy explain node: %v\n%s", err, out)
		}
		out, err = l.Node1.NS.Run(ctx, bin, "explain", "service", "default/does-not-exist")
		if err == nil || !strings.Contains(out, "no Service default/does-not-exist") {
			t.Errorf("kube-proxy explain service default/does-not-exist: %v\n%s", err, out)
		}
	})
}

// checkAnsweredBy probes every ClusterIP of svc from ns and checks that the pod
// that answered owns an endpoint that explain named for internal traffic.
func checkAnsweredBy(ctx context.Context, t *testing.T, p *proxytest.Proxy, ns *lab.NS, svc *v1.Service, doc *inspect.Service) {
	t.Helper()
	for _, port := range doc.Ports {
		to := netip.AddrPortFrom(netip.MustParseAddr(port.ClusterIP), uint16(port.Port))
		allowed := map[string]bool{}
		for _, ep := range port.Endpoints {
			if ep.Internal == inspect.Used {
				for _, pod := range p.Lab.Pods {
					for _, ip := range pod.Endpoint().IPs {
						if ip == netip.MustParseAddrPort(ep.Address).Addr() {
							allowed[pod.Name] = true
						}
					}
				}
			}
		}
		waitAnswered(ctx, t, p, ns, v1.ProtocolTCP, to, nil)
		onlyFrom(t, flow(ns, v1.ProtocolTCP, to), collect(ctx, t, p, ns, v1.ProtocolTCP, to, 10), allowed)
	}
}
