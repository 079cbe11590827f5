// Package rendertest builds the model inputs (ServicePorts, endpoints, views) that
// the tests of every renderer and of the nftables writer render, so that each
// mode's tests describe their cases with the same vocabulary and the views are the
// ones the model really gives. It is for tests only.
package rendertest

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/trace"
)

// NodeName is the node the views are categorized for.
const NodeName = "node-a"

// ServicePort builds a ClusterIP ServicePort; mutate the result for other types.
func ServicePort(ns, name, portName string, proto v1.Protocol, clusterIP string, port int32) *model.ServicePort {
	return &model.ServicePort{
		Name:      model.ServicePortName{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}, Port: portName, Protocol: proto},
		ClusterIP: netip.MustParseAddr(clusterIP),
		Port:      port,
		Protocol:  proto,
	}
}

// Endpoint builds a ready endpoint, on NodeName when local.
func Endpoint(ip string, port int32, local bool) *model.Endpoint {
	return &model.Endpoint{IP: netip.MustParseAddr(ip), Port: port, Ready: true, Serving: true, IsLocal: local}
}

// Terminating makes e a serving, terminating endpoint.
func Terminating(e *model.Endpoint) *model.Endpoint {
	e.Ready, e.Serving, e.Terminating = false, true, true
	return e
}

// View categorizes eps for sp with the model's CategorizeEndpoints on NodeName
// (no zone), as the sync loop gets them.
func View(sp *model.ServicePort, eps ...*model.Endpoint) *model.ServicePortView {
	// The model lists endpoints sorted by their "ip:port" string, as upstream.
	eps = slices.Clone(eps)
	slices.SortFunc(eps, func(a, b *model.Endpoint) int { return strings.Compare(a.String(), b.String()) })
	return model.CategorizeEndpoints(eps, sp, NodeName, "")
}

// ScaleView is the synthetic i-th Service of the scale tests and benchmarks: a
// NodePort on every 4th, an LB with source ranges on every 10th, affinity on every
// 50th, eTP Local on every 7th (with a health check node port when it is an LB), a
// local endpoint on every 3rd; eps endpoints each.
func ScaleView(i, eps int) *model.ServicePortView {
	sp := ServicePort(fmt.Sprintf("ns%d", i%97), fmt.Sprintf("svc%d", i), "p80", v1.ProtocolTCP,
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
		if len(sp.LoadBalancerVIPs) > 0 {
			sp.HealthCheckNodePort = int32(32000 + i%700)
		}
	}
	list := make([]*model.Endpoint, eps)
	for j := range list {
		n := i*eps + j
		list[j] = Endpoint(fmt.Sprintf("10.%d.%d.%d", n/65536, (n/256)%256, n%256), 8080, i%3 == 0 && j == 0)
	}
	return View(sp, list...)
}

// ScaleViews is ScaleView 0 to n-1.
func ScaleViews(n, eps int) []*model.ServicePortView {
	views := make([]*model.ServicePortView, n)
	for i := range views {
		views[i] = ScaleView(i, eps)
	}
	return views
}

// PlainViews are n Services shaped as make bench's (bench/load.go): one TCP port
// 80 with a ClusterIP only and eps endpoints each, none on this node.
func PlainViews(n, eps int) []*model.ServicePortView {
	views := make([]*model.ServicePortView, n)
	for i := range views {
		sp := ServicePort("default", fmt.Sprintf("bench-%05d", i), "http", v1.ProtocolTCP,
			fmt.Sprintf("172.30.%d.%d", i/250, i%250+1), 80)
		list := make([]*model.Endpoint, eps)
		for j := range list {
			n := i*eps + j
			list[j] = Endpoint(fmt.Sprintf("10.%d.%d.%d", n/65536, (n/256)%256, n%256), 80, false)
		}
		views[i] = View(sp, list...)
	}
	return views
}

// Addrs parses addresses.
func Addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

// Prefixes parses prefixes.
func Prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, p := range s {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}

// CheckFlow reports how a traced packet's result differs from a flow test's
// expectation: res.Output() is output; every path is masqueraded as masq, or,
// with hairpin set, exactly the path DNATed to hairpin is (a pod reaching itself
// through its Service); the paths' probabilities add up to 1.
func CheckFlow(res *trace.Result, output string, masq bool, hairpin string) []string {
	var errs []string
	if got := res.Output(); got != output {
		errs = append(errs, fmt.Sprintf("output %q, want %q", got, output))
	}
	if hairpin == "" && res.Masquerade != masq {
		errs = append(errs, fmt.Sprintf("masquerade %v, want %v", res.Masquerade, masq))
	}
	for _, o := range res.Outcomes {
		if want := o.DNAT == hairpin; hairpin != "" && o.Masquerade != want {
			errs = append(errs, fmt.Sprintf("outcome %s: masquerade %v, want %v", o.DNAT, o.Masquerade, want))
		}
	}
	if err := res.Check(); err != nil {
		errs = append(errs, err.Error())
	}
	return errs
}

// DescribeOutcomes describes a Result outcome by outcome (verdict, NAT,
// masquerade, mark, probability), to compare the traces of a rendered ruleset
// and of what the kernel lists back.
func DescribeOutcomes(r *trace.Result) string {
	var b strings.Builder
	for _, o := range r.Outcomes {
		fmt.Fprintf(&b, "%s dnat=%q snat=%q masq=%v mark=%#x p=%.9f\n", o.Verdict, o.DNAT, o.SNAT, o.Masquerade, o.Mark, o.Probability)
	}
	return b.String()
}
