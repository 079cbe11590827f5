package model_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/nftnetlink"
	rendeript "github.com/kproxy/kproxy/internal/render/iptables"
	renderipvs "github.com/kproxy/kproxy/internal/render/ipvs"
	rendernft "github.com/kproxy/kproxy/internal/render/nftables"
	"github.com/kproxy/kproxy/internal/watch"
)

// The fuzz targets of the model: Services and EndpointSlices as the API could send
// them, including what the API server would reject (bad or mixed-family IPs, empty
// and odd names, nil pointers, duplicate ports, huge or negative port numbers,
// unknown protocols, address types and policies), go through the daemon's path:
// the informers' transform (watch.Trimmer), the model of each family (State's
// handlers, Commit), and the renderers of the three modes (nftables: every view's
// fragment, the full sync's typed operations encoded as netlink messages
// (nftnetlink.InventoryOf); iptables: the full restore input, read back by
// iptables.ParseSave; ipvs: the desired state). Nothing panics, and the model's
// invariants hold after every Commit (checkState). FuzzModelEvents builds the
// objects from the bytes with a small generator (gen); FuzzModelJSON decodes them
// as JSON. The corpus is in testdata/fuzz. `make fuzz` runs them (hack/fuzz.sh).

const fuzzNode = "node-a"

// event is one informer event, or a commit (a sync).
type event struct {
	Kind    string                   `json:"kind"` // add, update, delete, zone, commit
	Service *v1.Service              `json:"service,omitempty"`
	Slice   *discovery.EndpointSlice `json:"slice,omitempty"`
	Zone    string                   `json:"zone,omitempty"`
}

// FuzzModelJSON: the events are JSON, a list of event.
func FuzzModelJSON(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		b, err := json.Marshal(seed)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var events []event
		if err := json.Unmarshal(data, &events); err != nil {
			return
		}
		runEvents(t, events)
	})
}

// FuzzModelEvents: the events are built by gen from the bytes.
func FuzzModelEvents(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"))
	f.Add(bytes.Repeat([]byte{0, 3, 1, 1, 2, 0, 1, 0, 0, 0, 2}, 8))
	f.Add([]byte("kproxy fuzzes the model with Services and EndpointSlices"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &gen{data: data}
		var events []event
		for !g.done() && len(events) < 24 {
			events = append(events, g.event())
		}
		runEvents(t, events)
	})
}

// fuzzSeeds are valid and invalid event lists: a dual-stack NodePort Service with
// endpoints on two nodes, then updates and deletes; a LoadBalancer with eTP Local,
// affinity and hints; and the objects with API-rejected values.
func fuzzSeeds() [][]event {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "svc1"},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeNodePort,
			ClusterIP:  "172.30.0.41",
			ClusterIPs: []string{"172.30.0.41", "fd30::41"},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol},
			Ports: []v1.ServicePort{
				{Name: "p80", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080, TargetPort: intstr.FromInt32(8080)},
				{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, TargetPort: intstr.FromString("dns")},
			},
		},
	}
	slice4 := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns1", Name: "svc1-abc", Labels: map[string]string{discovery.LabelServiceName: "svc1"}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.180.0.1"}, NodeName: ptr.To(fuzzNode), Zone: ptr.To("zone-a")},
			{Addresses: []string{"10.180.1.1"}, NodeName: ptr.To("node-b"), Conditions: discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}},
		},
		Ports: []discovery.EndpointPort{{Name: ptr.To("p80"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8080)}, {Name: ptr.To("dns"), Protocol: ptr.To(v1.ProtocolUDP), Port: ptr.To[int32](5353)}},
	}
	slice6 := slice4.DeepCopy()
	slice6.Name, slice6.AddressType = "svc1-def", discovery.AddressTypeIPv6
	slice6.Endpoints[0].Addresses, slice6.Endpoints[1].Addresses = []string{"fd00::1"}, []string{"fd00::2"}

	lb := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns2", Name: "lb"},
		Spec: v1.ServiceSpec{
			Type:                     v1.ServiceTypeLoadBalancer,
			ClusterIP:                "172.30.0.42",
			Ports:                    []v1.ServicePort{{Name: "p", Protocol: v1.ProtocolSCTP, Port: 7777, NodePort: 31000}},
			ExternalIPs:              []string{"192.0.2.1", "fd00::99", "bogus"},
			LoadBalancerSourceRanges: []string{"203.0.113.0/24", " 10.0.0.0/8 ", "0.0.0.0/0"},
			ExternalTrafficPolicy:    v1.ServiceExternalTrafficPolicyLocal,
			HealthCheckNodePort:      32000,
			SessionAffinity:          v1.ServiceAffinityClientIP,
			SessionAffinityConfig:    &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](100)}},
			TrafficDistribution:      ptr.To("PreferClose"),
		},
		Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "5.6.7.8"}, {IP: "5.6.7.9", IPMode: ptr.To(v1.LoadBalancerIPModeProxy)}}}},
	}
	lbSlice := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns2", Name: "lb-1", Labels: map[string]string{discovery.LabelServiceName: "lb"}, Annotations: map[string]string{v1.EndpointsLastChangeTriggerTime: "2026-12-06T21:00:00Z"}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.180.0.5"}, NodeName: ptr.To(fuzzNode), Hints: &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-a"}}}},
			{Addresses: []string{"10.180.0.6"}, NodeName: ptr.To("node-b"), Hints: &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-b"}}}},
		},
		Ports: []discovery.EndpointPort{{Name: ptr.To("p"), Protocol: ptr.To(v1.ProtocolSCTP), Port: ptr.To[int32](7777)}},
	}

	bad := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "", Name: "a b\"c"},
		Spec: v1.ServiceSpec{
			Type:       "Bogus",
			ClusterIP:  "10.96.0.01",
			ClusterIPs: []string{"10.96.0.01", "10.96.0.2", "not-an-ip"},
			Ports: []v1.ServicePort{
				{Name: "p", Protocol: "ICMP", Port: 70000, NodePort: -1},
				{Name: "p", Protocol: v1.ProtocolTCP, Port: 0},
				{Name: "p", Protocol: v1.ProtocolTCP, Port: 80},
			},
			SessionAffinity:       v1.ServiceAffinityClientIP,
			InternalTrafficPolicy: ptr.To[v1.ServiceInternalTrafficPolicy]("Bogus"),
		},
	}
	badSlice := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "", Name: "", Labels: map[string]string{discovery.LabelServiceName: "a b\"c"}, Annotations: map[string]string{v1.EndpointsLastChangeTriggerTime: "yesterday"}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{"fd00::1", "10.0.0.1"}},
			{Addresses: nil},
			{Addresses: []string{"10.0.0.1"}, Hints: &discovery.EndpointHints{}},
			{Addresses: []string{"300.1.1.1"}},
		},
		Ports: []discovery.EndpointPort{{}, {Name: ptr.To("p"), Port: ptr.To[int32](-5)}, {Name: ptr.To("p"), Protocol: ptr.To[v1.Protocol]("ICMP"), Port: ptr.To[int32](1 << 20)}},
	}
	// Before the model skipped them, a node port the kernel cannot hold made the
	// nftables full sync fail to encode (bad inet_service "1073741824").
	hugeNodePort := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, ClusterIP: "10.96.0.1", Ports: []v1.ServicePort{
			{Name: "a", Protocol: "ICMP", Port: 70000, NodePort: -1}, {Name: "b", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 1 << 30},
		}},
	}
	lbGone := lb.DeepCopy()
	lbGone.Spec.Ports = nil
	return [][]event{
		{{Kind: "add", Service: svc}, {Kind: "add", Slice: slice4}, {Kind: "add", Slice: slice6}, {Kind: "commit"},
			{Kind: "delete", Slice: slice4}, {Kind: "commit"}, {Kind: "delete", Service: svc}},
		{{Kind: "add", Service: lb}, {Kind: "add", Slice: lbSlice}, {Kind: "zone", Zone: "zone-a"}, {Kind: "commit"},
			{Kind: "update", Service: lbGone}, {Kind: "zone", Zone: "zone-b"}},
		{{Kind: "add", Service: bad}, {Kind: "add", Slice: badSlice}, {Kind: "commit"}, {Kind: "update", Service: bad}},
		{{Kind: "add", Service: hugeNodePort}},
	}
}

// runEvents feeds events to a dual-stack proxy's models as the daemon does, checks
// the models after every commit, and in the end deletes every object and checks
// that the models are empty.
func runEvents(t *testing.T, events []event) {
	trimmer := watch.NewTrimmer(fuzzNode)
	states := []*model.State{model.NewState(v1.IPv4Protocol, fuzzNode), model.NewState(v1.IPv6Protocol, fuzzNode)}
	// What the informer caches hold, by namespace/name.
	services := map[string]*v1.Service{}
	slices := map[string]*model.EndpointSlice{}
	key := func(m metav1.Object) string { return m.GetNamespace() + "/" + m.GetName() }
	for _, ev := range events {
		switch {
		case ev.Kind == "commit":
			for _, s := range states {
				checkCommit(t, s, s.Commit())
			}
		case ev.Kind == "zone":
			for _, s := range states {
				s.OnNodeTopologyChange(map[string]string{v1.LabelTopologyZone: ev.Zone})
			}
		case ev.Service != nil:
			obj, err := trimmer.TrimForProxy(ev.Service.DeepCopy())
			if err != nil {
				t.Fatalf("trimming a Service: %v", err)
			}
			svc := obj.(*v1.Service)
			old := services[key(svc)]
			switch {
			case ev.Kind == "delete" && old != nil:
				delete(services, key(svc))
				for _, s := range states {
					s.OnServiceDelete(old)
				}
			case ev.Kind == "delete":
			case old != nil:
				services[key(svc)] = svc
				for _, s := range states {
					s.OnServiceUpdate(old, svc)
				}
			default:
				services[key(svc)] = svc
				for _, s := range states {
					s.OnServiceAdd(svc)
				}
			}
		case ev.Slice != nil:
			obj, err := trimmer.TrimForProxy(ev.Slice.DeepCopy())
			if err != nil {
				t.Fatalf("trimming an EndpointSlice: %v", err)
			}
			slice := obj.(*model.EndpointSlice)
			old := slices[key(slice)]
			switch {
			case ev.Kind == "delete" && old != nil:
				delete(slices, key(slice))
				for _, s := range states {
					s.OnEndpointSliceDelete(old)
				}
			case ev.Kind == "delete":
			case old != nil:
				slices[key(slice)] = slice
				for _, s := range states {
					s.OnEndpointSliceUpdate(old, slice)
				}
			default:
				slices[key(slice)] = slice
				for _, s := range states {
					s.OnEndpointSliceAdd(slice)
				}
			}
		}
	}
	for _, s := range states {
		checkCommit(t, s, s.Commit())
		checkRenderers(t, s)
	}
	// Everything deleted: the models hold nothing.
	for _, svc := range services {
		for _, s := range states {
			s.OnServiceDelete(svc)
		}
	}
	for _, slice := range slices {
		for _, s := range states {
			s.OnEndpointSliceDelete(slice)
		}
	}
	for _, s := range states {
		checkCommit(t, s, s.Commit())
		if n := s.Len(); n != 0 || len(s.ServicePortNames()) != 0 || len(s.HealthCheckNodePorts()) != 0 {
			t.Fatalf("%s: with every object deleted the model still holds %d ServicePorts %v, health check node ports %v",
				s.Family(), n, s.ServicePortNames(), s.HealthCheckNodePorts())
		}
	}
}

// checkCommit checks an Update and the model's views after the Commit.
func checkCommit(t *testing.T, s *model.State, upd *model.Update) {
	t.Helper()
	fam := s.Family()
	sorted := func(what string, names []model.ServicePortName) {
		if !slices.IsSortedFunc(names, model.CompareServicePortNames) || len(slices.CompactFunc(slices.Clone(names), func(a, b model.ServicePortName) bool { return a == b })) != len(names) {
			t.Fatalf("%s: Update.%s not sorted or with duplicates: %v", fam, what, names)
		}
	}
	sorted("Changed", upd.Changed)
	sorted("Deleted", upd.Deleted)
	for _, name := range upd.Deleted {
		if _, found := slices.BinarySearchFunc(upd.Changed, name, model.CompareServicePortNames); found {
			t.Fatalf("%s: %v both changed and deleted", fam, name)
		}
		if s.View(name) != nil {
			t.Fatalf("%s: %v deleted but still has a view", fam, name)
		}
	}
	for _, name := range upd.Changed {
		if s.View(name) == nil {
			t.Fatalf("%s: %v changed but has no view", fam, name)
		}
	}
	n := 0
	for v := range s.Views() {
		n++
		checkView(t, fam, v)
	}
	if n != s.Len() || n != len(s.ServicePortNames()) {
		t.Fatalf("%s: %d views, Len %d, %d names", fam, n, s.Len(), len(s.ServicePortNames()))
	}
}

// checkView: every address of a view is of the model's family, and its endpoint
// lists are consistent (local endpoints are local, AllReachableEndpoints is the
// union of the other two).
func checkView(t *testing.T, fam v1.IPFamily, v *model.ServicePortView) {
	t.Helper()
	is6 := fam == v1.IPv6Protocol
	addr := func(what string, a netip.Addr) {
		if !a.IsValid() || a.Is6() != is6 || a.Is4In6() {
			t.Fatalf("%s %v: %s %v is not an %s address", fam, v.Name, what, a, fam)
		}
	}
	addr("cluster IP", v.ClusterIP)
	for _, a := range v.ExternalIPs {
		addr("external IP", a)
	}
	for _, a := range v.LoadBalancerVIPs {
		addr("load balancer VIP", a)
	}
	for _, p := range v.LoadBalancerSourceRanges {
		addr("source range", p.Addr())
	}
	union := map[*model.Endpoint]bool{}
	for _, e := range v.ClusterEndpoints {
		addr("endpoint", e.IP)
		union[e] = true
	}
	for _, e := range v.LocalEndpoints {
		addr("endpoint", e.IP)
		if !e.IsLocal {
			t.Fatalf("%s %v: local endpoint %v is not on this node", fam, v.Name, e)
		}
		union[e] = true
	}
	all := map[*model.Endpoint]bool{}
	for _, e := range v.AllReachableEndpoints {
		all[e] = true
	}
	for e := range union {
		if !all[e] {
			t.Fatalf("%s %v: endpoint %v is used but not in AllReachableEndpoints", fam, v.Name, e)
		}
	}
	if len(v.AllReachableEndpoints) > 0 && !v.HasAnyEndpoints {
		t.Fatalf("%s %v: reachable endpoints but HasAnyEndpoints false", fam, v.Name)
	}
}

// checkRenderers renders the model's views in every mode.
func checkRenderers(t *testing.T, s *model.State) {
	t.Helper()
	views := slices.Collect(s.Views())
	is6 := s.Family() == v1.IPv6Protocol
	node := netip.MustParseAddr("192.168.0.2")
	podCIDR := netip.MustParsePrefix("10.0.0.0/8")
	nftFamily := knftables.IPv4Family
	if is6 {
		node, podCIDR, nftFamily = netip.MustParseAddr("fd00::2"), netip.MustParsePrefix("fd10::/64"), knftables.IPv6Family
	}
	detector := model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: []netip.Prefix{podCIDR}}
	nodePorts := model.NodePortAddresses{IPs: []netip.Addr{node}}

	nftCfg := &rendernft.Config{Family: nftFamily, NodePortAddresses: nodePorts, LocalDetector: detector, MasqueradeBit: 14, NodeIP: node}
	base := rendernft.RenderBase(nftCfg)
	st := rendernft.NewState(&base, rendernft.RenderServices(nftCfg, views))
	ex, err := nftnetlink.New(nftFamily, rendernft.TableName, nftnetlink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ex.InventoryOf(rendernft.FullOps(st)); err != nil {
		t.Fatalf("nftables: the full sync does not encode: %v", err)
	}

	iptCfg := &rendeript.Config{Family: s.Family(), NodePortAddresses: nodePorts, LocalDetector: detector, MasqueradeBit: 14, NodeIP: node}
	iptBase := rendeript.RenderBase(iptCfg)
	var buf bytes.Buffer
	rendeript.WriteFull(&buf, rendeript.NewState(&iptBase, rendeript.RenderServices(iptCfg, views)), nil)
	if _, err := iptables.ParseSave(buf.Bytes()); err != nil {
		t.Fatalf("iptables: the full restore input does not read back: %v", err)
	}

	ipvsCfg := &renderipvs.Config{Family: s.Family(), MasqueradeBit: 14, LocalDetector: detector, NodePortAddresses: nodePorts, NodeIP: node, HostAddresses: []netip.Addr{node}}
	_ = renderipvs.Render(ipvsCfg, views)
}

// gen builds events from fuzz bytes: each choice reads one byte (0 once the bytes
// are used up), so that every prefix of the input is a smaller test.
type gen struct {
	data []byte
}

func (g *gen) done() bool { return len(g.data) == 0 }

func (g *gen) byte() byte {
	if len(g.data) == 0 {
		return 0
	}
	b := g.data[0]
	g.data = g.data[1:]
	return b
}

func (g *gen) n(max int) int { return int(g.byte()) % max }

func pick[T any](g *gen, from []T) T { return from[g.n(len(from))] }

func pickPtr[T any](g *gen, from []T) *T {
	i := g.n(len(from) + 1)
	if i == len(from) {
		return nil
	}
	return ptr.To(from[i])
}

var (
	genNames      = []string{"svc1", "svc2", "", "a b", "UPPER", "x/y", strings.Repeat("n", 70)}
	genNamespaces = []string{"ns1", "ns2", ""}
	genIPs        = []string{"10.96.0.1", "172.30.0.42", "fd30::1", "fd00::5", "10.180.0.1", "10.180.0.2", "fd00::1",
		"192.168.0.2", "127.0.0.1", "::1", "0.0.0.0", "::", "10.96.0.01", "::ffff:10.0.0.1", "300.1.1.1", "bogus", "", "None", " 10.0.0.3", "fe80::1%eth0"}
	genCIDRs     = []string{"10.0.0.0/8", "0.0.0.0/0", "::/0", "fd00::/64", "1.2.3.4", " 203.0.113.0/24 ", "10.0.0.1/33", "bogus", "", "10.1.2.3/8"}
	genProtocols = []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP, "", "ICMP", "tcp"}
	genPorts     = []int32{80, 53, 8080, 0, -1, 65535, 65536, 1 << 30, -1 << 31, 30080, 30080}
	genTypes     = []v1.ServiceType{v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer, v1.ServiceTypeExternalName, "", "Bogus"}
	genFamilies  = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol, "IPv5", ""}
	genZones     = []string{"zone-a", "zone-b", ""}
	genNodes     = []string{fuzzNode, "node-b", ""}
	genTimes     = []string{"2026-12-06T21:00:00Z", "2026-12-06T21:00:01.5+01:00", "yesterday", ""}
	genIPModes   = []v1.LoadBalancerIPMode{v1.LoadBalancerIPModeVIP, v1.LoadBalancerIPModeProxy, "Bogus"}
	genAffinity  = []int32{10800, 1, 0, -1, 86400, 86401, 1<<31 - 1}
	genDistrib   = []string{"PreferClose", "PreferSameZone", "PreferSameNode", "Bogus", ""}
	genAddrTypes = []discovery.AddressType{discovery.AddressTypeIPv4, discovery.AddressTypeIPv6, discovery.AddressTypeFQDN, "", "Bogus"}
	genPortNames = []string{"p80", "dns", "", "p80"}
)

func (g *gen) strings(from []string, max int) []string {
	n := g.n(max + 1)
	if n == 0 && g.n(2) == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = pick(g, from)
	}
	return out
}

func (g *gen) event() event {
	switch g.n(8) {
	case 0, 1:
		return event{Kind: pick(g, []string{"add", "update", "delete"}), Service: g.service()}
	case 2, 3, 4:
		return event{Kind: pick(g, []string{"add", "update", "delete"}), Slice: g.slice()}
	case 5:
		return event{Kind: "zone", Zone: pick(g, genZones)}
	}
	return event{Kind: "commit"}
}

func (g *gen) service() *v1.Service {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: pick(g, genNamespaces), Name: pick(g, genNames)}}
	sp := &svc.Spec
	sp.Type = pick(g, genTypes)
	sp.ClusterIP = pick(g, genIPs)
	sp.ClusterIPs = g.strings(genIPs, 3)
	for range g.n(3) {
		sp.IPFamilies = append(sp.IPFamilies, pick(g, genFamilies))
	}
	for range g.n(5) {
		p := v1.ServicePort{Name: pick(g, genPortNames), Protocol: pick(g, genProtocols), Port: pick(g, genPorts)}
		if g.n(2) == 0 {
			p.NodePort = pick(g, genPorts)
		}
		if g.n(2) == 0 {
			p.TargetPort = intstr.FromString(pick(g, genPortNames))
		} else {
			p.TargetPort = intstr.FromInt32(pick(g, genPorts))
		}
		sp.Ports = append(sp.Ports, p)
	}
	sp.ExternalIPs = g.strings(genIPs, 2)
	sp.LoadBalancerSourceRanges = g.strings(genCIDRs, 2)
	for range g.n(3) {
		sp := v1.LoadBalancerIngress{IP: pick(g, genIPs), IPMode: pickPtr(g, genIPModes)}
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, sp)
	}
	sp.SessionAffinity = pick(g, []v1.ServiceAffinity{v1.ServiceAffinityNone, v1.ServiceAffinityClientIP, v1.ServiceAffinityClientIP, "", "Bogus"})
	switch g.n(3) {
	case 0:
		sp.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: pickPtr(g, genAffinity)}}
	case 1:
		sp.SessionAffinityConfig = &v1.SessionAffinityConfig{}
	}
	sp.ExternalTrafficPolicy = pick(g, []v1.ServiceExternalTrafficPolicy{v1.ServiceExternalTrafficPolicyCluster, v1.ServiceExternalTrafficPolicyLocal, "", "Bogus"})
	sp.InternalTrafficPolicy = pickPtr(g, []v1.ServiceInternalTrafficPolicy{v1.ServiceInternalTrafficPolicyCluster, v1.ServiceInternalTrafficPolicyLocal, "Bogus"})
	if g.n(2) == 0 {
		sp.HealthCheckNodePort = pick(g, genPorts)
	}
	sp.TrafficDistribution = pickPtr(g, genDistrib)
	if g.n(4) == 0 {
		svc.Labels = map[string]string{"service.kubernetes.io/service-proxy-name": "other"}
	}
	return svc
}

func (g *gen) slice() *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: pick(g, genNamespaces), Name: fmt.Sprintf("slice-%d", g.n(4))},
		AddressType: pick(g, genAddrTypes),
	}
	if g.n(5) != 0 {
		s.Labels = map[string]string{discovery.LabelServiceName: pick(g, genNames)}
	}
	if t := pick(g, genTimes); t != "" {
		s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: t}
	}
	for range g.n(5) {
		ep := discovery.Endpoint{
			Addresses: g.strings(genIPs, 2),
			Conditions: discovery.EndpointConditions{
				Ready: pickPtr(g, []bool{true, false}), Serving: pickPtr(g, []bool{true, false}), Terminating: pickPtr(g, []bool{true, false}),
			},
			NodeName: pickPtr(g, genNodes),
			Zone:     pickPtr(g, genZones),
		}
		switch g.n(4) {
		case 0:
			ep.Hints = &discovery.EndpointHints{}
		case 1:
			ep.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: pick(g, genZones)}}, ForNodes: []discovery.ForNode{{Name: pick(g, genNodes)}}}
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	for range g.n(4) {
		s.Ports = append(s.Ports, discovery.EndpointPort{Name: pickPtr(g, genPortNames), Protocol: pickPtr(g, genProtocols), Port: pickPtr(g, genPorts)})
	}
	return s
}
