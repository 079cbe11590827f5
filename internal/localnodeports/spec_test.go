package localnodeports

import (
	"iter"
	"net/netip"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kproxy/kproxy/internal/model"
)

func name(svc string) model.ServicePortName {
	return model.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: svc}, Port: "p", Protocol: v1.ProtocolTCP}
}

func ep(s string, local bool) *model.Endpoint {
	ap := netip.MustParseAddrPort(s)
	return &model.Endpoint{IP: ap.Addr(), Port: int32(ap.Port()), Ready: true, Serving: true, IsLocal: local}
}

// nodePortView is a NodePort view with its endpoints categorized as the model does
// without topology: Cluster endpoints are all, Local ones the local ones.
func nodePortView(svc string, proto v1.Protocol, nodePort int32, eps ...*model.Endpoint) *model.ServicePortView {
	n := name(svc)
	n.Protocol = proto
	sp := &model.ServicePort{Name: n, ClusterIP: netip.MustParseAddr("172.30.0.1"), Port: 80, Protocol: proto, NodePort: nodePort}
	v := &model.ServicePortView{ServicePort: sp, ClusterEndpoints: eps, AllReachableEndpoints: eps, HasAnyEndpoints: len(eps) > 0}
	for _, e := range eps {
		if e.IsLocal {
			v.LocalEndpoints = append(v.LocalEndpoints, e)
		}
	}
	return v
}

func addrPorts(s ...string) []netip.AddrPort {
	out := make([]netip.AddrPort, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddrPort(a)
	}
	return out
}

func TestServesLoopback(t *testing.T) {
	for _, tc := range []struct {
		addrs    []string
		v4, v6   bool
		scenario string
	}{
		{nil, false, false, "unset"},
		{[]string{"0.0.0.0/0", "::/0"}, false, false, "all: contains loopback, not explicitly"},
		{[]string{"127.0.0.0/8", "::1/128"}, true, true, "the localhost keyword"},
		{[]string{"192.168.0.2/32", "127.0.0.1/32"}, true, false, "primary plus one loopback address"},
		{[]string{"127.0.0.1/8"}, true, false, "host bits set"},
		{[]string{"0.0.0.0/0", "127.0.0.0/8"}, true, false, "all plus localhost: upstream serves loopback too"},
		{[]string{"::1/128"}, false, true, "IPv6 only"},
		{[]string{"::1/127"}, false, false, "network ::, not loopback"},
		{[]string{"::ffff:127.0.0.1/128"}, true, false, "IPv4-mapped"},
		{[]string{"bogus", "10.0.0.0/8"}, false, false, "no loopback"},
	} {
		if got := ServesLoopback(v1.IPv4Protocol, tc.addrs); got != tc.v4 {
			t.Errorf("%s: IPv4 = %v, want %v", tc.scenario, got, tc.v4)
		}
		if got := ServesLoopback(v1.IPv6Protocol, tc.addrs); got != tc.v6 {
			t.Errorf("%s: IPv6 = %v, want %v", tc.scenario, got, tc.v6)
		}
	}
}

func TestListenAddress(t *testing.T) {
	if got := ListenAddress(v1.IPv4Protocol).String(); got != "127.0.0.1" {
		t.Errorf("IPv4: %s", got)
	}
	if got := ListenAddress(v1.IPv6Protocol).String(); got != "::1" {
		t.Errorf("IPv6: %s", got)
	}
}

func TestSpecFor(t *testing.T) {
	remote, local := ep("10.0.1.5:8080", false), ep("10.0.0.5:8080", true)
	local6 := ep("[fd00::5]:8080", true)

	etpLocal := nodePortView("etp-local", v1.ProtocolTCP, 30001, remote, local)
	etpLocal.ExternalPolicyLocal = true
	etpLocalNone := nodePortView("etp-local-none", v1.ProtocolTCP, 30002, remote)
	etpLocalNone.ExternalPolicyLocal = true
	sticky := nodePortView("sticky", v1.ProtocolTCP, 30003, remote)
	sticky.StickyMaxAgeSeconds = 10800
	noNodePort := nodePortView("clusterip", v1.ProtocolTCP, 0, remote)

	for _, tc := range []struct {
		scenario string
		family   v1.IPFamily
		view     *model.ServicePortView
		want     *Spec
	}{
		{"TCP NodePort: the Cluster endpoints, sorted", v1.IPv4Protocol, nodePortView("web", v1.ProtocolTCP, 30080, remote, local),
			&Spec{Name: name("web"), NodePort: 30080, Endpoints: addrPorts("10.0.0.5:8080", "10.0.1.5:8080")}},
		{"eTP Local: the local endpoints", v1.IPv4Protocol, etpLocal,
			&Spec{Name: name("etp-local"), NodePort: 30001, Endpoints: addrPorts("10.0.0.5:8080")}},
		{"eTP Local without local endpoints: none", v1.IPv4Protocol, etpLocalNone, nil},
		{"affinity", v1.IPv4Protocol, sticky,
			&Spec{Name: name("sticky"), NodePort: 30003, Endpoints: addrPorts("10.0.1.5:8080"), AffinityTimeout: 3 * time.Hour}},
		{"UDP: the proxy serves TCP only", v1.IPv4Protocol, nodePortView("dns", v1.ProtocolUDP, 30053, remote), nil},
		{"SCTP", v1.IPv4Protocol, nodePortView("sig", v1.ProtocolSCTP, 30077, remote), nil},
		{"no NodePort", v1.IPv4Protocol, noNodePort, nil},
		{"no endpoints", v1.IPv4Protocol, nodePortView("empty", v1.ProtocolTCP, 30081), nil},
		{"endpoints of the other family are ignored", v1.IPv6Protocol, nodePortView("web", v1.ProtocolTCP, 30080, remote, local6),
			&Spec{Name: name("web"), NodePort: 30080, Endpoints: addrPorts("[fd00::5]:8080")}},
		{"only endpoints of the other family", v1.IPv6Protocol, nodePortView("web", v1.ProtocolTCP, 30080, remote), nil},
		{"nil view", v1.IPv4Protocol, nil, nil},
	} {
		got, ok := SpecFor(tc.family, tc.view)
		switch {
		case tc.want == nil && ok:
			t.Errorf("%s: got %+v, want no listener", tc.scenario, got)
		case tc.want != nil && !ok:
			t.Errorf("%s: no listener, want %+v", tc.scenario, *tc.want)
		case tc.want != nil && !got.Equal(tc.want):
			t.Errorf("%s: got %+v, want %+v", tc.scenario, got, *tc.want)
		}
	}
}

// fakeViews is a Views over a map.
type fakeViews map[model.ServicePortName]*model.ServicePortView

func (f fakeViews) View(n model.ServicePortName) *model.ServicePortView { return f[n] }

func (f fakeViews) Views() iter.Seq[*model.ServicePortView] {
	return func(yield func(*model.ServicePortView) bool) {
		names := make([]model.ServicePortName, 0, len(f))
		for n := range f {
			names = append(names, n)
		}
		slices.SortFunc(names, model.CompareServicePortNames)
		for _, n := range names {
			if !yield(f[n]) {
				return
			}
		}
	}
}

func specNames(specs []Spec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name.Name
	}
	return out
}

// TestTracker: a full sync takes every view, partial syncs the changed and deleted
// ones; every sync hands the whole list (sorted by name) to the manager, also when
// nothing changed, so a listener that failed to bind is retried.
func TestTracker(t *testing.T) {
	views := fakeViews{}
	add := func(v *model.ServicePortView) { views[v.Name] = v }
	add(nodePortView("b", v1.ProtocolTCP, 30002, ep("10.0.0.2:80", false)))
	add(nodePortView("a", v1.ProtocolTCP, 30001, ep("10.0.0.1:80", false)))
	udp := nodePortView("dns", v1.ProtocolUDP, 30053, ep("10.0.0.3:53", false))
	add(udp)

	fake := &Fake{}
	tr := NewTracker(v1.IPv4Protocol, views, fake)
	tr.Synced(true, nil, nil)
	last, _ := fake.Last()
	if got := specNames(last); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after the full sync: %v, want [a b]", got)
	}

	// b loses its endpoints, c appears, a is deleted.
	add(nodePortView("b", v1.ProtocolTCP, 30002))
	add(nodePortView("c", v1.ProtocolTCP, 30003, ep("10.0.0.4:80", false)))
	delete(views, name("a"))
	tr.Synced(false, []model.ServicePortName{name("b"), name("c")}, []model.ServicePortName{name("a")})
	last, _ = fake.Last()
	if got := specNames(last); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("after the partial sync: %v, want [c]", got)
	}

	// Nothing changed: the same list again.
	tr.Synced(false, nil, nil)
	if syncs := fake.Syncs(); len(syncs) != 3 || !slices.Equal(specNames(syncs[2]), []string{"c"}) {
		t.Fatalf("an unchanged sync handed %v", syncs)
	}

	// A full sync forgets what the model no longer has.
	delete(views, name("c"))
	tr.Synced(true, nil, nil)
	if last, _ = fake.Last(); len(last) != 0 {
		t.Fatalf("after the last full sync: %v, want none", specNames(last))
	}
}
