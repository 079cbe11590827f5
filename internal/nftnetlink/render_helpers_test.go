package nftnetlink

import (
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// These helpers mirror the renderer's own test helpers (internal/render/nftables
// helpers_test.go, plan_test.go), which are not importable.

func testConfig(family knftables.Family) *render.Config {
	if family == knftables.IPv6Family {
		return &render.Config{
			Family:            family,
			NodePortAddresses: model.NodePortAddresses{IPs: []netip.Addr{netip.MustParseAddr("fd00::2")}},
			LocalDetector:     model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("fd10::/64")}},
			MasqueradeBit:     14,
			ServiceCIDRs:      []netip.Prefix{netip.MustParsePrefix("fd30::/108")},
			NodeIP:            netip.MustParseAddr("fd00::2"),
		}
	}
	return &render.Config{
		Family:            family,
		NodePortAddresses: model.NodePortAddresses{IPs: []netip.Addr{netip.MustParseAddr("192.168.0.2"), netip.MustParseAddr("127.0.0.1")}},
		LocalDetector:     model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
		MasqueradeBit:     14,
		ServiceCIDRs:      []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16")},
		NodeIP:            netip.MustParseAddr("192.168.0.2"),
	}
}

func svcPort(ns, name, portName string, proto v1.Protocol, clusterIP string, port int32) *model.ServicePort {
	return &model.ServicePort{
		Name:      model.ServicePortName{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}, Port: portName, Protocol: proto},
		ClusterIP: netip.MustParseAddr(clusterIP),
		Port:      port,
		Protocol:  proto,
	}
}

func ep(ip string, port int32, local bool) *model.Endpoint {
	return &model.Endpoint{IP: netip.MustParseAddr(ip), Port: port, Ready: true, Serving: true, IsLocal: local}
}

func terminating(e *model.Endpoint) *model.Endpoint {
	e.Ready, e.Serving, e.Terminating = false, true, true
	return e
}

// view categorizes endpoints as upstream's CategorizeEndpoints does (minus topology):
// ready endpoints, else serving-terminating ones.
func view(sp *model.ServicePort, eps ...*model.Endpoint) *model.ServicePortView {
	usable := func(filter func(*model.Endpoint) bool) []*model.Endpoint {
		var ready, term []*model.Endpoint
		for _, e := range eps {
			if !filter(e) {
				continue
			}
			if e.Ready {
				ready = append(ready, e)
			} else if e.Serving && e.Terminating {
				term = append(term, e)
			}
		}
		if len(ready) > 0 {
			return ready
		}
		return term
	}
	v := &model.ServicePortView{ServicePort: sp}
	all := usable(func(*model.Endpoint) bool { return true })
	v.HasAnyEndpoints = len(all) > 0
	if sp.UsesClusterEndpoints() {
		v.ClusterEndpoints = all
	}
	if sp.UsesLocalEndpoints() {
		v.LocalEndpoints = usable(func(e *model.Endpoint) bool { return e.IsLocal })
	}
	seen := map[*model.Endpoint]bool{}
	for _, e := range append(append([]*model.Endpoint{}, v.ClusterEndpoints...), v.LocalEndpoints...) {
		if !seen[e] {
			seen[e] = true
			v.AllReachableEndpoints = append(v.AllReachableEndpoints, e)
		}
	}
	return v
}

// scaleView is the renderer's synthetic i-th Service: a NodePort on every 4th, an
// LB with source ranges on every 10th, affinity on every 50th, eTP Local on every
// 7th, a local endpoint on every 3rd.
func scaleView(i, eps int) *model.ServicePortView {
	sp := svcPort(fmt.Sprintf("ns%d", i%97), fmt.Sprintf("svc%d", i), "p80", v1.ProtocolTCP,
		fmt.Sprintf("172.30.%d.%d", i/250, i%250+1), 80)
	if i%4 == 0 {
		sp.NodePort = int32(30000 + i%2768)
	}
	if i%10 == 0 {
		sp.LoadBalancerVIPs = []netip.Addr{netip.MustParseAddr(fmt.Sprintf("5.%d.%d.%d", i/65536, (i/256)%256, i%256))}
		sp.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}
	}
	if i%50 == 0 {
		sp.StickyMaxAgeSeconds = 10800
	}
	if i%7 == 0 {
		sp.ExternalPolicyLocal = true
	}
	list := make([]*model.Endpoint, eps)
	for j := range list {
		n := i*eps + j
		list[j] = ep(fmt.Sprintf("10.%d.%d.%d", n/65536, (n/256)%256, n%256), 8080, i%3 == 0 && j == 0)
	}
	return view(sp, list...)
}

func scaleViews(n, eps int) []*model.ServicePortView {
	views := make([]*model.ServicePortView, n)
	for i := range views {
		views[i] = scaleView(i, eps)
	}
	return views
}

func renderState(cfg *render.Config, views []*model.ServicePortView) *render.State {
	base := render.RenderBase(cfg)
	return render.NewState(&base, render.RenderServices(cfg, views))
}

func fragment(cfg *render.Config, v *model.ServicePortView) *render.Fragment {
	f := render.RenderService(cfg, v)
	return &f
}
