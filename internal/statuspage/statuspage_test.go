package statuspage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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

	"github.com/kproxy/kproxy/internal/dataplane/followup"
	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
	"github.com/kproxy/kproxy/internal/drift"
	"github.com/kproxy/kproxy/internal/inspect"
	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/testing/golden"
)

const testNode = "node-a"

// now is the pages' clock in every test.
var now = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

// fakeProxier is a proxier with fixed syncs, failures and series.
type fakeProxier struct {
	published *proxycore.Published
	series    []proxycore.SeriesPoint
	failures  []proxycore.SyncRecord
	drift     *drift.Report
}

func (f *fakeProxier) Syncs() []proxycore.SyncRecord {
	return []proxycore.SyncRecord{
		{Start: now.Add(-time.Second), Duration: 2 * time.Millisecond, Wrote: true, Changed: 1, Operations: 4},
		{Start: now.Add(-2 * time.Second), Duration: 1500 * time.Millisecond, Full: true, Wrote: true, Changed: 4, Operations: 120,
			Err: errors.New("netlink: file exists")},
	}
}

func (f *fakeProxier) Failures() []proxycore.SyncRecord { return f.failures }
func (f *fakeProxier) Series() []proxycore.SeriesPoint  { return f.series }
func (f *fakeProxier) Published() *proxycore.Published  { return f.published }
func (f *fakeProxier) LastDrift() *drift.Report         { return f.drift }
func (f *fakeProxier) programmed(n int, d time.Duration) followup.Programming {
	return followup.Programming{Count: n, Sum: time.Duration(n) * d, Max: 2 * d}
}

// testSource is a dual-stack node: IPv4 with a Service with endpoints and one
// without, IPv6 with the first only; both families synced over the last hour, and
// IPv4 failed twice.
func testSource(t *testing.T) *inspect.Source {
	t.Helper()
	v4 := model.NewState(v1.IPv4Protocol, testNode)
	v4.OnNodeTopologyChange(map[string]string{v1.LabelTopologyZone: "zone-a"})
	v4.OnServiceAdd(service("default", "web", v1.IPv4Protocol, "10.96.0.10", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = 30080
	}))
	v4.AddEndpointSlice(slice("default", "web", discovery.AddressTypeIPv4,
		endpoint("10.244.1.5", testNode, "zone-a", true, false), endpoint("10.244.2.6", "node-b", "zone-b", false, false)))
	v4.OnServiceAdd(service("kube-system", "empty", v1.IPv4Protocol, "10.96.0.11", nil))
	v4.Commit()
	v6 := model.NewState(v1.IPv6Protocol, testNode)
	v6.OnNodeTopologyChange(map[string]string{v1.LabelTopologyZone: "zone-a"})
	v6.OnServiceAdd(service("default", "web", v1.IPv6Protocol, "fd00::10", nil))
	v6.AddEndpointSlice(slice("default", "web", discovery.AddressTypeIPv6, endpoint("fd00:10:244:1::5", testNode, "zone-a", true, false)))
	v6.Commit()

	describe := func(v *model.ServicePortView) []string {
		return []string{"chain service-" + v.Name.String(), "  ip daddr " + v.ClusterIP.String() + " goto endpoints"}
	}
	f4 := &fakeProxier{published: &proxycore.Published{
		NodePortAddresses: model.NodePortAddresses{IPs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}},
		LocalDetector:     model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}},
		ServiceCIDRs:      []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")},
		Describe:          describe,
	}}
	f6 := &fakeProxier{published: &proxycore.Published{NodePortAddresses: model.NodePortAddresses{All: true}, Describe: describe}}
	for i, ago := range []time.Duration{55 * time.Minute, 30 * time.Minute, 10 * time.Minute, 20 * time.Second} {
		start := now.Add(-ago).Truncate(proxycore.SeriesStep)
		d := time.Duration(i+1) * 4 * time.Millisecond
		f4.series = append(f4.series, proxycore.SeriesPoint{Start: start, Syncs: 3, DurationSum: 3 * d, DurationMax: 2 * d,
			Programming: f4.programmed(2, 50*time.Millisecond*time.Duration(i+1))})
		f6.series = append(f6.series, proxycore.SeriesPoint{Start: start, Syncs: 1, DurationSum: d, DurationMax: d})
	}
	f4.series[1].Failures = 1
	f4.failures = []proxycore.SyncRecord{
		{Start: now.Add(-30 * time.Minute), Duration: 12 * time.Millisecond, Wrote: true, Changed: 2, Err: errors.New(`nftables IPv4 transaction: netlink: <b>"busy"</b>`)},
		{Start: now.Add(-50 * time.Minute), Duration: 900 * time.Millisecond, Full: true, Wrote: true, Err: errors.New("iptables-restore: exit status 4")},
	}
	return &inspect.Source{NodeName: testNode, Mode: "nftables", Families: []inspect.Family{
		{State: v4, Proxier: f4}, {State: v6, Proxier: f6},
	}}
}

func service(ns, name string, family v1.IPFamily, clusterIP string, mutate func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			IPFamilies: []v1.IPFamily{family},
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

func slice(ns, svc string, at discovery.AddressType, eps ...discovery.Endpoint) *discovery.EndpointSlice {
	return &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svc + "-" + strings.ToLower(string(at)), Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: at,
		Endpoints:   eps,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
}

// TestNodePage checks the node page of a fixed node against testdata.
func TestNodePage(t *testing.T) {
	var b bytes.Buffer
	if err := RenderNode(&b, BuildNodePage(testSource(t), now, "", "")); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "node.html", b.String())
	// The error text is escaped, never markup.
	if strings.Contains(b.String(), "<b>") {
		t.Error("an error's text reached the page unescaped")
	}
}

// TestServicePage checks the page of one Service against testdata.
func TestServicePage(t *testing.T) {
	src := testSource(t)
	svc, ok := inspect.BuildService(src.Families, types.NamespacedName{Namespace: "default", Name: "web"}, "")
	if !ok {
		t.Fatal("default/web not found")
	}
	var b bytes.Buffer
	if err := RenderService(&b, &ServicePage{Now: now, NodeName: testNode, Mode: "nftables", Service: svc}); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "service-default-web.html", b.String())
}

// TestChart checks the SVG of a fixed chart, and of one without data.
func TestChart(t *testing.T) {
	page := BuildNodePage(testSource(t), now, "", "")
	golden.Check(t, "durations.svg", string(page.Durations.SVG())+"\n")
	empty := &Chart{Title: "Nothing <yet>", From: now.Add(-time.Hour), To: now, Lines: []Line{{Label: "IPv4 max", Class: "c0"}}}
	golden.Check(t, "empty.svg", string(empty.SVG())+"\n")
}

func TestNiceCeilAndFormat(t *testing.T) {
	for _, c := range []struct {
		in, want time.Duration
		text     string
	}{
		{0, time.Millisecond, "1 ms"},
		{300 * time.Microsecond, time.Millisecond, "1 ms"},
		{1100 * time.Microsecond, 2 * time.Millisecond, "2 ms"},
		{7 * time.Millisecond, 10 * time.Millisecond, "10 ms"},
		{450 * time.Millisecond, 500 * time.Millisecond, "500 ms"},
		{1500 * time.Millisecond, 2 * time.Second, "2 s"},
	} {
		if got := niceCeil(c.in); got != c.want || formatDuration(got) != c.text {
			t.Errorf("niceCeil(%s) = %s (%q), want %s (%q)", c.in, got, formatDuration(got), c.want, c.text)
		}
	}
	if got := formatDuration(1234567 * time.Nanosecond); got != "1.2 ms" {
		t.Errorf("formatDuration(1.234567ms) = %q", got)
	}
	if got := formatDuration(250 * time.Microsecond); got != "250 µs" {
		t.Errorf("formatDuration(250µs) = %q", got)
	}
}

// TestHandler serves the pages over HTTP: the node page, its search and paging,
// a Service's page, the 404s, and that the state API's paths are left alone.
func TestHandler(t *testing.T) {
	src := testSource(t)
	// More Services than a page, in a namespace of their own.
	st := src.Families[0].State
	for i := range PageSize + 20 {
		st.OnServiceAdd(service("bulk", fmt.Sprintf("svc-%03d", i), v1.IPv4Protocol, fmt.Sprintf("10.96.1.%d", i), nil))
	}
	st.Commit()
	mux := http.NewServeMux()
	mux.Handle(Path, Handler(src, func() time.Time { return now }))
	mux.Handle(inspect.PathPrefix, inspect.Handler(src))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}

	code, body := get("/kproxy/")
	if code != http.StatusOK || !strings.Contains(body, `<span id="node-name">node-a</span>`) {
		t.Fatalf("node page: %d\n%s", code, body)
	}
	if n := strings.Count(body, `class="service"`); n != PageSize {
		t.Errorf("node page: %d Service rows, want one page of %d", n, PageSize)
	}
	if !strings.Contains(body, fmt.Sprintf("Showing %d of %d Services.", PageSize, PageSize+22)) {
		t.Errorf("node page: no count of all Services")
	}

	code, body = get("/kproxy/?q=" + url.QueryEscape("BULK/svc-11"))
	if code != http.StatusOK || strings.Count(body, `class="service"`) != 10 || !strings.Contains(body, "Showing 10 of 10 matching Services (122 in all).") ||
		strings.Contains(body, `id="next"`) || !strings.Contains(body, `value="BULK/svc-11"`) {
		t.Errorf("search bulk/svc-11: %d\n%s", code, body)
	}

	code, body = get("/kproxy/?q=bulk")
	next := `href="/kproxy/?continue=bulk%2Fsvc-099&amp;q=bulk"`
	if code != http.StatusOK || !strings.Contains(body, next) {
		t.Fatalf("search bulk: %d, no next link %s", code, next)
	}
	code, body = get("/kproxy/?continue=bulk%2Fsvc-099&q=bulk")
	if code != http.StatusOK || strings.Count(body, `class="service"`) != 20 || !strings.Contains(body, "bulk/svc-100") || strings.Contains(body, "bulk/svc-099<") {
		t.Errorf("second page of bulk: %d\n%s", code, body)
	}

	code, body = get("/kproxy/services/default/web")
	if code != http.StatusOK || !strings.Contains(body, `<td class="endpoint">10.244.1.5:8080</td>`) || !strings.Contains(body, `<td class="endpoint">[fd00:10:244:1::5]:8080</td>`) {
		t.Errorf("Service page: %d\n%s", code, body)
	}
	for _, path := range []string{"/kproxy/services/default/nope", "/kproxy/nothing"} {
		if code, _ := get(path); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, code)
		}
	}
	if code, body := get(inspect.PathPrefix + "node"); code != http.StatusOK || !strings.Contains(body, `"kind":"Node"`) {
		t.Errorf("the state API's node document: %d %s", code, body)
	}
}

// TestBoundedAt30k: with 30,000 Services the node page shows one page of the
// table and stays small.
func TestBoundedAt30k(t *testing.T) {
	if testing.Short() {
		t.Skip("30,000 Services: not under -short")
	}
	st := model.NewState(v1.IPv4Protocol, testNode)
	for i := range 30000 {
		st.OnServiceAdd(service(fmt.Sprintf("ns-%02d", i%50), fmt.Sprintf("svc-%05d", i), v1.IPv4Protocol,
			netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}).String(), nil))
	}
	st.Commit()
	src := &inspect.Source{NodeName: testNode, Mode: "iptables", Families: []inspect.Family{{State: st}}}
	var b bytes.Buffer
	start := time.Now()
	if err := RenderNode(&b, BuildNodePage(src, now, "svc-1", "")); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), `class="service"`); n != PageSize {
		t.Errorf("%d Service rows, want %d", n, PageSize)
	}
	if !strings.Contains(b.String(), "Showing 100 of 10000 matching Services (30000 in all).") {
		t.Errorf("no count of the matches and of all Services")
	}
	if b.Len() > 64<<10 {
		t.Errorf("the page is %d bytes", b.Len())
	}
	t.Logf("node page at 30,000 Services: %d bytes in %s", b.Len(), time.Since(start))
}
