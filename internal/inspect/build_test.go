package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
	"github.com/kproxy/kproxy/internal/drift"
	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/testing/golden"
)

const testNode = "node-a"

// fakeProxier is a proxier that synced twice and describes a port by its name.
type fakeProxier struct{ published *proxycore.Published }

func (f *fakeProxier) Syncs() []proxycore.SyncRecord {
	start := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	return []proxycore.SyncRecord{
		{Start: start.Add(time.Second), Duration: 2 * time.Millisecond, Wrote: true, Changed: 1, Operations: 4},
		{Start: start, Duration: 1500 * time.Millisecond, Full: true, Wrote: true, Changed: 4, Operations: 120,
			Err: errors.New("netlink: file exists")},
	}
}

func (f *fakeProxier) Failures() []proxycore.SyncRecord { return f.Syncs()[1:] }

func (f *fakeProxier) Series() []proxycore.SeriesPoint { return nil }

func (f *fakeProxier) Published() *proxycore.Published { return f.published }

func (f *fakeProxier) LastDrift() *drift.Report {
	return &drift.Report{Family: "IPv4", Checked: time.Date(2026, 12, 5, 10, 0, 30, 0, time.UTC), Duration: 0.012}
}

// testFamilies is one IPv4 family holding a Service for each way traffic is
// handled and each reason an endpoint is not used.
func testFamilies(t *testing.T) []Family {
	t.Helper()
	st := model.NewState(v1.IPv4Protocol, testNode)
	st.OnNodeTopologyChange(map[string]string{v1.LabelTopologyZone: "zone-a"})

	// web: a LoadBalancer with externalTrafficPolicy Local, source ranges and
	// affinity; a local ready, a remote ready, a local terminating and a remote
	// not-ready endpoint.
	st.OnServiceAdd(service("default", "web", "10.96.0.10", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = 30080
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = 31000
		s.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24"}
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](600)}}
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "203.0.113.10"}}
	}))
	st.AddEndpointSlice(slice("default", "web", endpoint("10.244.1.5", testNode, "zone-a", true, false),
		endpoint("10.244.2.6", "node-b", "zone-b", true, false),
		endpoint("10.244.1.7", testNode, "zone-a", false, true),
		endpoint("10.244.2.8", "node-b", "zone-b", false, false)))

	// empty: no endpoints at all (rejected).
	st.OnServiceAdd(service("default", "empty", "10.96.0.11", nil))

	// local-only: internalTrafficPolicy Local with remote endpoints only (dropped).
	st.OnServiceAdd(service("default", "local-only", "10.96.0.12", func(s *v1.Service) {
		s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	}))
	st.AddEndpointSlice(slice("default", "local-only", endpoint("10.244.2.9", "node-b", "zone-b", true, false)))

	// hinted: topology-aware routing to zone-a, with externalIPs.
	st.OnServiceAdd(service("zones", "hinted", "10.96.0.13", func(s *v1.Service) {
		s.Spec.ExternalIPs = []string{"192.0.2.50"}
	}))
	a := endpoint("10.244.1.10", testNode, "zone-a", true, false)
	a.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-a"}}}
	b := endpoint("10.244.2.11", "node-b", "zone-b", true, false)
	b.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-b"}}}
	st.AddEndpointSlice(slice("zones", "hinted", a, b))
	st.Commit()

	return []Family{{State: st, Proxier: &fakeProxier{published: &proxycore.Published{
		NodePortAddresses: model.NodePortAddresses{All: true},
		LocalDetector:     model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}},
		Describe: func(v *model.ServicePortView) []string {
			return []string{"chain service-" + v.Name.String()}
		},
	}}}}
}

func service(ns, name, clusterIP string, mutate func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports:      []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func endpoint(ip, node, zone string, ready, terminating bool) discovery.Endpoint {
	return discovery.Endpoint{
		Addresses: []string{ip}, NodeName: ptr.To(node), Zone: ptr.To(zone),
		Conditions: discovery.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(ready || terminating), Terminating: ptr.To(terminating)},
	}
}

func slice(ns, svc string, eps ...discovery.Endpoint) *discovery.EndpointSlice {
	return &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svc + "-1", Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints:   eps,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
}

// TestService checks the explanation of every test Service, as JSON and as the
// table `kube-proxy explain service` prints, against testdata.
func TestService(t *testing.T) {
	families := testFamilies(t)
	for _, name := range []types.NamespacedName{
		{Namespace: "default", Name: "web"}, {Namespace: "default", Name: "empty"},
		{Namespace: "default", Name: "local-only"}, {Namespace: "zones", Name: "hinted"},
	} {
		t.Run(name.String(), func(t *testing.T) {
			svc, ok := BuildService(families, name, "")
			if !ok {
				t.Fatalf("BuildService(%s): not found", name)
			}
			b, err := json.MarshalIndent(svc, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "service-"+name.Namespace+"-"+name.Name+".json", string(b)+"\n")
			var table bytes.Buffer
			if err := PrintService(&table, svc); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "service-"+name.Namespace+"-"+name.Name+".txt", table.String())
		})
	}
}

func TestNode(t *testing.T) {
	n := BuildNode(testNode, "nftables", testFamilies(t))
	b, err := json.MarshalIndent(n, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "node.json", string(b)+"\n")
	var table bytes.Buffer
	if err := PrintNode(&table, n, 10); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "node.txt", table.String())
}

// TestHandler reads every document through the HTTP handler and the client, as
// `kube-proxy explain` does: paging, filters, the port selector and the errors.
func TestHandler(t *testing.T) {
	srv := httptest.NewServer(Handler(&Source{NodeName: testNode, Mode: "nftables", Families: testFamilies(t)}))
	defer srv.Close()
	c := &Client{Address: strings.TrimPrefix(srv.URL, "http://")}
	ctx := context.Background()

	var all []string
	q := url.Values{"limit": {"3"}}
	for page := 0; ; page++ {
		var list ServiceList
		if err := c.Get(ctx, "services", q, &list); err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		if len(list.Items) > 3 {
			t.Fatalf("page %d: %d items, limit 3", page, len(list.Items))
		}
		for _, s := range list.Items {
			all = append(all, s.Namespace+"/"+s.Name)
		}
		if list.Continue == "" {
			break
		}
		q.Set("continue", list.Continue)
	}
	if got, want := strings.Join(all, " "), "default/empty default/local-only default/web zones/hinted"; got != want {
		t.Errorf("paged list: %s, want %s", got, want)
	}

	var list ServiceList
	if err := c.Get(ctx, "services", url.Values{"namespace": {"zones"}}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "hinted" || list.Items[0].Ports[0].Usable != 1 || list.Items[0].Ports[0].Endpoints != 2 {
		t.Errorf("namespace zones: %+v", list.Items)
	}

	var svc Service
	if err := c.Get(ctx, "services/default/web", url.Values{"port": {"80"}}, &svc); err != nil {
		t.Fatal(err)
	}
	if len(svc.Ports) != 1 || svc.Ports[0].Name != "http" {
		t.Errorf("port 80 of default/web: %+v", svc.Ports)
	}

	for path, want := range map[string]string{
		"services/default/nope": "no Service default/nope in this proxy's model",
		"nothing":               "no such document: nothing",
	} {
		if err := c.Get(ctx, path, nil, &svc); err == nil || err.Error() != want {
			t.Errorf("GET %s: error %v, want %q", path, err, want)
		}
	}
	if err := c.Get(ctx, "services/default/web", url.Values{"port": {"https"}}, &svc); err == nil ||
		err.Error() != `no port "https" of Service default/web in this proxy's model` {
		t.Errorf("missing port: %v", err)
	}
	resp, err := http.Get(srv.URL + PathPrefix + "services?limit=x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("limit=x: %s, want 400", resp.Status)
	}
}

// TestVerification: every family's comparison, a family that cannot compare and
// one whose comparison failed, as JSON and as the table `kube-proxy verify` prints.
func TestVerification(t *testing.T) {
	fams := testFamilies(t)
	fams[0].Verify = func(context.Context) (*drift.Report, error) {
		r := &drift.Report{Family: "IPv4", Checked: time.Date(2026, 12, 5, 10, 1, 0, 0, time.UTC), Duration: 0.0042}
		r.Add(drift.Difference{Kind: "table", Change: drift.Missing})
		r.Add(drift.Difference{Kind: "element", Name: "service-ips", Change: drift.Changed, Detail: "2 missing, 0 extra of 7"})
		return r, nil
	}
	v6 := testFamilies(t)[0]
	v6.Verify = func(context.Context) (*drift.Report, error) { return nil, errors.New("nothing applied yet") }
	none := testFamilies(t)[0]
	fams = append(fams, v6, none)
	v := BuildVerification(context.Background(), fams)
	if got := v.Differences(); got != 2 {
		t.Errorf("Differences() = %d, want 2", got)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "verify.json", string(b)+"\n")
	var table bytes.Buffer
	if err := PrintVerification(&table, v); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "verify.txt", table.String())
}
