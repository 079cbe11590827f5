package iptables

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kproxy/kproxy/internal/conntrack"
	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/metrics"
	"github.com/kproxy/kproxy/internal/model"
	render "github.com/kproxy/kproxy/internal/render/iptables"
)

const (
	testNodeName = "node-a"
	testNodeIP   = "192.168.0.2"
)

var errInjected = errors.New("injected iptables-restore failure")

// fakeHealth records Updated calls per family.
type fakeHealth struct {
	mu      sync.Mutex
	updated map[v1.IPFamily]int
}

func (h *fakeHealth) Updated(family v1.IPFamily) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.updated == nil {
		h.updated = map[v1.IPFamily]int{}
	}
	h.updated[family]++
}

func (h *fakeHealth) count(family v1.IPFamily) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.updated[family]
}

// fakeServiceHealth records the arguments of every call.
type fakeServiceHealth struct {
	services  []map[types.NamespacedName]uint16
	endpoints []map[types.NamespacedName]int
	err       error
}

func (f *fakeServiceHealth) SyncServices(m map[types.NamespacedName]uint16) error {
	f.services = append(f.services, m)
	return f.err
}

func (f *fakeServiceHealth) SyncEndpoints(m map[types.NamespacedName]int) error {
	f.endpoints = append(f.endpoints, m)
	return f.err
}

// fixture is a Proxier for IPv4 with every dependency faked.
type fixture struct {
	t         *testing.T
	proxier   *Proxier
	ipt       *iptables.Fake
	state     *model.State
	conntrack *conntrack.Fake
	registry  *prometheus.Registry
	clock     *clocktesting.FakeClock
	health    *fakeHealth
	svcHealth *fakeServiceHealth
}

func testRenderConfig() render.Config {
	return render.Config{
		Family:            v1.IPv4Protocol,
		NodePortAddresses: render.NodePortAddresses{IPs: []netip.Addr{netip.MustParseAddr(testNodeIP)}},
		LocalDetector:     render.LocalDetector{Mode: render.DetectClusterCIDR, CIDR: netip.MustParsePrefix("10.0.0.0/8")},
		MasqueradeBit:     14,
		NodeIP:            netip.MustParseAddr(testNodeIP),
	}
}

func newFixture(t *testing.T, mutate ...func(*Config)) *fixture {
	t.Helper()
	f := &fixture{
		t:         t,
		ipt:       iptables.NewFake(v1.IPv4Protocol),
		state:     model.NewState(v1.IPv4Protocol, testNodeName),
		conntrack: conntrack.NewFake(),
		registry:  prometheus.NewRegistry(),
		clock:     clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)),
		health:    &fakeHealth{},
		svcHealth: &fakeServiceHealth{},
	}
	m := metrics.New(f.registry)
	if err := m.Register(metrics.RegisterOptions{Mode: metrics.ModeIPTables}); err != nil {
		t.Fatalf("registering metrics: %v", err)
	}
	cfg := Config{
		Family:        v1.IPv4Protocol,
		Render:        testRenderConfig(),
		IPT:           f.ipt,
		State:         f.state,
		Conntrack:     f.conntrack,
		Metrics:       m.Family(v1.IPv4Protocol),
		Health:        f.health,
		ServiceHealth: f.svcHealth,
		Clock:         f.clock,
	}
	for _, mut := range mutate {
		mut(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.proxier = p
	return f
}

func (f *fixture) sync() {
	f.t.Helper()
	if err := f.proxier.Sync(context.Background()); err != nil {
		f.t.Fatalf("Sync: %v", err)
	}
}

// restores returns the number of restores run so far.
func (f *fixture) restores() int { return len(f.ipt.Restores()) }

// lastRestore returns the input of the last restore ("" when none).
func (f *fixture) lastRestore() string {
	all := f.ipt.Restores()
	if len(all) == 0 {
		return ""
	}
	return all[len(all)-1]
}

// lastWasFull reports whether the last restore was a full sync (it declares, hence
// flushes, the shared chains).
func (f *fixture) lastWasFull() bool {
	return strings.Contains(f.lastRestore(), ":KUBE-SERVICES - [0:0]")
}

// ours is what the Fake holds of kproxy's chains (and the jumps to them), with the
// entries of the shared chains sorted: partial syncs insert them at the top, and
// their order has no meaning. The tail rules (jumps to KUBE-NODEPORTS) stay last.
func ours(fake *iptables.Fake) string {
	shared := map[string]bool{render.ChainServices: true, render.ChainNodePorts: true,
		render.ChainExternalServices: true, render.ChainProxyFirewall: true}
	var out []string
	for _, table := range []iptables.Table{iptables.TableFilter, iptables.TableNAT} {
		for _, line := range strings.Split(fake.Dump(table), "\n") {
			if strings.HasPrefix(line, ":KUBE-") && !strings.HasPrefix(line, ":"+render.ChainCanary+" ") {
				out = append(out, line)
			}
		}
		for _, chain := range fake.Chains(table) {
			rules := fake.Rules(table, chain)
			if shared[string(chain)] {
				var entries, tails []string
				for _, r := range rules {
					if strings.HasSuffix(r, "-j "+render.ChainNodePorts) {
						tails = append(tails, r)
					} else {
						entries = append(entries, r)
					}
				}
				slices.Sort(entries)
				rules = append(entries, tails...)
			}
			for _, r := range rules {
				out = append(out, "-A "+string(chain)+" "+r)
			}
		}
	}
	return strings.Join(out, "\n")
}

// expected programs the model from scratch with cfg into a fresh Fake, as a full
// sync of a new proxier would.
func (f *fixture) expected(cfg render.Config) string {
	f.t.Helper()
	fresh := iptables.NewFake(v1.IPv4Protocol)
	ctx := context.Background()
	for _, j := range render.JumpRules() {
		if _, err := fresh.EnsureChain(ctx, iptables.Table(j.Table), iptables.Chain(j.Target)); err != nil {
			f.t.Fatal(err)
		}
		if _, err := fresh.EnsureRule(ctx, true, iptables.Table(j.Table), iptables.Chain(j.Chain), j.Args...); err != nil {
			f.t.Fatal(err)
		}
	}
	base := render.RenderBase(&cfg)
	st := render.NewState(&base, render.RenderServices(&cfg, slices.Collect(f.state.Views())))
	var buf bytes.Buffer
	render.WriteFull(&buf, st, nil)
	if err := fresh.Restore(ctx, buf.Bytes()); err != nil {
		f.t.Fatalf("fresh full render: %v", err)
	}
	return ours(fresh)
}

// checkRulesAreFullRender fails unless the Fake holds a fresh full render.
func (f *fixture) checkRulesAreFullRender(cfg render.Config) {
	f.t.Helper()
	if diff := cmp.Diff(f.expected(cfg), ours(f.ipt)); diff != "" {
		f.t.Errorf("rules differ from a full render (-want +got):\n%s", diff)
	}
}

// Metric readers.

func (f *fixture) metricFamily(name string) *dto.MetricFamily {
	f.t.Helper()
	families, err := f.registry.Gather()
	if err != nil {
		f.t.Fatalf("gather: %v", err)
	}
	for _, mf := range families {
		if mf.GetName() == name {
			return mf
		}
	}
	return nil
}

// metricValue returns the value of the counter or gauge name with the given labels
// (0 when the series does not exist).
func (f *fixture) metricValue(name string, labels map[string]string) float64 {
	f.t.Helper()
	m := findSeries(f.metricFamily(name), labels)
	switch {
	case m == nil:
		return 0
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	f.t.Fatalf("%s is neither a counter nor a gauge", name)
	return 0
}

// histogram returns the sample count of a histogram series.
func (f *fixture) histogram(name string, labels map[string]string) uint64 {
	f.t.Helper()
	m := findSeries(f.metricFamily(name), labels)
	if m == nil || m.Histogram == nil {
		return 0
	}
	return m.Histogram.GetSampleCount()
}

func findSeries(mf *dto.MetricFamily, labels map[string]string) *dto.Metric {
	if mf == nil {
		return nil
	}
	for _, m := range mf.GetMetric() {
		match := len(m.GetLabel()) == len(labels)
		for _, lp := range m.GetLabel() {
			if labels[lp.GetName()] != lp.GetValue() {
				match = false
			}
		}
		if match {
			return m
		}
	}
	return nil
}

var ipv4Label = map[string]string{"ip_family": "IPv4"}

func tableLabel(table string) map[string]string {
	return map[string]string{"ip_family": "IPv4", "table": table}
}

// API object builders.

type svcOpt func(*v1.Service)

func makeService(ns, name, clusterIP string, opts ...svcOpt) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			ClusterIP:  clusterIP,
			ClusterIPs: []string{clusterIP},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
		},
	}
	for _, o := range opts {
		o(svc)
	}
	return svc
}

func withPort(name string, proto v1.Protocol, port, targetPort int32) svcOpt {
	return func(svc *v1.Service) {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: name, Protocol: proto, Port: port, TargetPort: intstr.FromInt32(targetPort)})
	}
}

// asLoadBalancer makes the Service a LoadBalancer with the given VIP and node port
// on its last port; local sets externalTrafficPolicy Local with healthCheckNodePort.
func asLoadBalancer(vip string, nodePort int32, local bool, healthCheckNodePort int32) svcOpt {
	return func(svc *v1.Service) {
		svc.Spec.Type = v1.ServiceTypeLoadBalancer
		svc.Spec.Ports[len(svc.Spec.Ports)-1].NodePort = nodePort
		svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: vip}}
		if local {
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			svc.Spec.HealthCheckNodePort = healthCheckNodePort
		}
	}
}

func withInternalLocal() svcOpt {
	return func(svc *v1.Service) {
		svc.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	}
}

type sliceEndpoint struct {
	ip      string
	node    string
	serving bool // ready and serving when true; neither when false
}

func ready(ip, node string) sliceEndpoint { return sliceEndpoint{ip: ip, node: node, serving: true} }

func makeSlice(ns, svc, name string, port int32, portName string, proto v1.Protocol, eps ...sliceEndpoint) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   ns,
			Name:        name,
			Labels:      map[string]string{discovery.LabelServiceName: svc},
			Annotations: map[string]string{},
		},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(port), Protocol: ptr.To(proto)}},
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{
			Addresses: []string{e.ip},
			NodeName:  ptr.To(e.node),
			Conditions: discovery.EndpointConditions{
				Ready: ptr.To(e.serving), Serving: ptr.To(e.serving), Terminating: ptr.To(false),
			},
		})
	}
	return s
}

func withTriggerTime(s *discovery.EndpointSlice, t time.Time) *discovery.EndpointSlice {
	s.Annotations[v1.EndpointsLastChangeTriggerTime] = t.Format(time.RFC3339Nano)
	return s
}

// addStandardServices feeds the model a TCP ClusterIP Service, a UDP ClusterIP
// Service (each with a local and a remote endpoint) and an eTP=Local LoadBalancer
// whose only endpoint is on another node.
func addStandardServices(f *fixture) {
	st := f.state
	st.OnServiceAdd(makeService("ns1", "web", "172.30.0.10", withPort("http", v1.ProtocolTCP, 80, 8080)))
	st.OnEndpointSliceAdd(makeSlice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP,
		ready("10.0.1.1", testNodeName), ready("10.0.2.1", "node-b")))

	st.OnServiceAdd(makeService("ns1", "dns", "172.30.0.53", withPort("dns", v1.ProtocolUDP, 53, 5353)))
	st.OnEndpointSliceAdd(makeSlice("ns1", "dns", "dns-1", 5353, "dns", v1.ProtocolUDP,
		ready("10.0.1.2", testNodeName), ready("10.0.2.2", "node-b")))

	st.OnServiceAdd(makeService("ns2", "lb", "172.30.0.20", withPort("http", v1.ProtocolTCP, 80, 8080),
		asLoadBalancer("1.2.3.4", 30080, true, 30999)))
	st.OnEndpointSliceAdd(makeSlice("ns2", "lb", "lb-1", 8080, "http", v1.ProtocolTCP, ready("10.0.2.3", "node-b")))
}
