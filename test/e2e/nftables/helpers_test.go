package nftables

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
)

// Bounds of the suite's waits.
const (
	syncTimeout  = 20 * time.Second       // a change is programmed and answers
	dropTimeout  = 400 * time.Millisecond // a probe expected to be dropped
	probeTimeout = time.Second
)

// tcpUDP lists both protocols a Service port is tested with.
var tcpUDP = []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP}

// lbCounter hands out load-balancer addresses unique within the run.
var lbCounter atomic.Int32

func nextLBIndex() int { return int(lbCounter.Add(1)) + 10 }

// testCtx returns a context bounded by d and canceled at the end of t.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// forEachFamily runs fn as a subtest per IP family.
func forEachFamily(t *testing.T, fn func(t *testing.T, fam v1.IPFamily)) {
	for _, fam := range lab.Families {
		t.Run(string(fam), func(t *testing.T) { fn(t, fam) })
	}
}

// tcpPort is a named TCP service port to a numeric target.
func svcPort(name string, proto v1.Protocol, port, target int32) v1.ServicePort {
	return v1.ServicePort{Name: name, Protocol: proto, Port: port, TargetPort: intstr.FromInt32(target)}
}

// createService creates a RequireDualStack Service called name (mutated by mutate)
// with endpoints eps (ports from the Service unless ports is set), and deletes both
// at the end of t.
func createService(ctx context.Context, t *testing.T, l *lab.Lab, name string, mutate func(*v1.Service), eps []lab.Endpoint, ports []discoveryv1.EndpointPort) *v1.Service {
	t.Helper()
	want := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.ServiceSpec{
			IPFamilyPolicy: ptr.To(v1.IPFamilyPolicyRequireDualStack),
			IPFamilies:     []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol},
			Ports:          []v1.ServicePort{svcPort("http", v1.ProtocolTCP, 80, 8080)},
		},
	}
	if mutate != nil {
		mutate(want)
	}
	svc, err := l.CreateService(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteService(t, l, svc) })
	setEndpoints(ctx, t, l, svc, eps, ports)
	return svc
}

// deleteService deletes svc and its slices (no garbage collector runs in the lab).
func deleteService(t *testing.T, l *lab.Lab, svc *v1.Service) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.DeleteService(ctx, svc); err != nil {
		t.Log(err)
	}
}

func setEndpoints(ctx context.Context, t *testing.T, l *lab.Lab, svc *v1.Service, eps []lab.Endpoint, ports []discoveryv1.EndpointPort) {
	t.Helper()
	if _, err := l.SetEndpoints(ctx, svc, eps, ports); err != nil {
		t.Fatalf("endpoints of %s: %v", svc.Name, err)
	}
}

// clusterIP returns the Service's ClusterIP of fam.
func clusterIP(t *testing.T, svc *v1.Service, fam v1.IPFamily) netip.Addr {
	t.Helper()
	for _, s := range svc.Spec.ClusterIPs {
		a := netip.MustParseAddr(s)
		if familyOf(a) == fam {
			return a
		}
	}
	t.Fatalf("service %s has no %s ClusterIP: %v", svc.Name, fam, svc.Spec.ClusterIPs)
	return netip.Addr{}
}

func familyOf(a netip.Addr) v1.IPFamily {
	if a.Unmap().Is4() {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

// nodePort returns the node port of the Service's port called name.
func nodePort(t *testing.T, svc *v1.Service, name string) uint16 {
	t.Helper()
	for _, p := range svc.Spec.Ports {
		if p.Name == name && p.NodePort != 0 {
			return uint16(p.NodePort)
		}
	}
	t.Fatalf("service %s: no node port for port %q", svc.Name, name)
	return 0
}

// podNames returns the names of pods.
func podNames(pods ...*lab.Pod) map[string]bool {
	out := map[string]bool{}
	for _, p := range pods {
		out[p.Name] = true
	}
	return out
}

// probeTarget describes one flow in failure messages.
func flow(from *lab.NS, proto v1.Protocol, to netip.AddrPort) string {
	return fmt.Sprintf("%s %s -> %s", proto, shortName(from.Name), to)
}

// waitAnswered waits until a probe from ns is answered and check accepts the reply.
func waitAnswered(ctx context.Context, t *testing.T, p *proxytest.Proxy, ns *lab.NS, proto v1.Protocol, to netip.AddrPort, check func(lab.Reply) error) lab.Reply {
	t.Helper()
	var got lab.Reply
	err := p.WaitFor(ctx, flow(ns, proto, to)+" answered", syncTimeout, func(ctx context.Context) error {
		res := ns.ProbeWith(ctx, lab.Probe{Protocol: proto, Target: to, Timeout: probeTimeout})
		if res.Outcome != lab.Answered {
			return fmt.Errorf("probe: %s", res)
		}
		if check != nil {
			if err := check(res.Reply); err != nil {
				return err
			}
		}
		got = res.Reply
		return nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, dumpRules(p))
	}
	return got
}

// outcomeTimeout bounds a probe whose expected outcome is want: TimedOut probes use
// a short timeout, refused IPv6 TCP probes a longer one (see refuseBound).
func outcomeTimeout(proto v1.Protocol, to netip.AddrPort, want lab.Outcome) time.Duration {
	switch want {
	case lab.TimedOut:
		return dropTimeout
	case lab.Refused:
		return max(probeTimeout, 2*refuseBound(proto, to))
	}
	return probeTimeout
}

// refuseBound is how fast a rejected connection must fail. The node sends the ICMP
// error at once in both families, but Linux TCP over IPv6 aborts a connect on an
// ICMPv6 port unreachable only once it has retransmitted its SYN (after 1 s): the
// pod counts two Icmp6InDestUnreachs per connect, and the connect fails after
// about 1 s, with upstream kube-proxy exactly as with kproxy. UDP and IPv4 TCP fail
// at the first error.
func refuseBound(proto v1.Protocol, to netip.AddrPort) time.Duration {
	if proto == v1.ProtocolTCP && to.Addr().Is6() {
		return 1500 * time.Millisecond
	}
	return 500 * time.Millisecond
}

// waitOutcome waits until a probe from ns has outcome want.
func waitOutcome(ctx context.Context, t *testing.T, p *proxytest.Proxy, ns *lab.NS, proto v1.Protocol, to netip.AddrPort, want lab.Outcome) {
	t.Helper()
	timeout := outcomeTimeout(proto, to, want)
	err := p.WaitFor(ctx, fmt.Sprintf("%s: %s", flow(ns, proto, to), want), syncTimeout, func(ctx context.Context) error {
		res := ns.ProbeWith(ctx, lab.Probe{Protocol: proto, Target: to, Timeout: timeout})
		if res.Outcome != want {
			return fmt.Errorf("probe: %s", res)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, dumpRules(p))
	}
}

// waitNotAnswered waits until a probe from ns to `to` is not answered, refused or
// timed out alike: for upstream's ipvs mode, where a virtual server without real
// servers answers ICMP port unreachable, which the kernel rate-limits (so a probe
// sees Refused or, right after another, TimedOut).
func waitNotAnswered(ctx context.Context, t *testing.T, p *proxytest.Proxy, ns *lab.NS, proto v1.Protocol, to netip.AddrPort) {
	t.Helper()
	err := p.WaitFor(ctx, fmt.Sprintf("%s: not answered", flow(ns, proto, to)), syncTimeout, func(ctx context.Context) error {
		res := ns.ProbeWith(ctx, lab.Probe{Protocol: proto, Target: to, Timeout: dropTimeout})
		if res.Outcome == lab.Answered {
			return fmt.Errorf("probe: %s", res)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, dumpRules(p))
	}
}

// expectOutcome checks, once, that a probe from ns has outcome want.
func expectOutcome(ctx context.Context, t *testing.T, p *proxytest.Proxy, ns *lab.NS, proto v1.Protocol, to netip.AddrPort, want lab.Outcome) {
	t.Helper()
	timeout := outcomeTimeout(proto, to, want)
	res := ns.ProbeWith(ctx, lab.Probe{Protocol: proto, Target: to, Timeout: timeout})
	if res.Outcome != want {
		t.Errorf("%s: got %s, want %s\n%s", flow(ns, proto, to), res, want, dumpRules(p))
	}
}

// collect sends n probes from ns; every one must be answered. It returns the replies.
func collect(ctx context.Context, t *testing.T, p *proxytest.Proxy, ns *lab.NS, proto v1.Protocol, to netip.AddrPort, n int) []lab.Reply {
	t.Helper()
	var out []lab.Reply
	for i := 0; i < n; i++ {
		res := ns.ProbeWith(ctx, lab.Probe{Protocol: proto, Target: to, Timeout: probeTimeout})
		if res.Outcome != lab.Answered {
			t.Fatalf("%s: probe %d of %d: %s (want answered)\n%s", flow(ns, proto, to), i+1, n, res, dumpRules(p))
		}
		out = append(out, res.Reply)
	}
	return out
}

// answeringPods counts replies per pod.
func answeringPods(replies []lab.Reply) map[string]int {
	out := map[string]int{}
	for _, r := range replies {
		out[r.Pod]++
	}
	return out
}

// onlyFrom fails t unless every reply came from a pod in allowed.
func onlyFrom(t *testing.T, what string, replies []lab.Reply, allowed map[string]bool) {
	t.Helper()
	got := answeringPods(replies)
	for pod := range got {
		if !allowed[pod] {
			t.Errorf("%s: answered by %v, want only %v", what, got, keys(allowed))
			return
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// podIs returns a reply check accepting only the named pods.
func podIs(names ...string) func(lab.Reply) error {
	return func(r lab.Reply) error {
		for _, n := range names {
			if r.Pod == n {
				return nil
			}
		}
		return fmt.Errorf("answered by %s, want one of %v", r.Pod, names)
	}
}

// dumpRules renders the proxy's rules in node1 for failure messages: the nftables
// ruleset, or iptables-save of both families in iptables mode (and, in ipvs mode,
// the virtual servers, kube-ipvs0's addresses and the ipsets).
func dumpRules(p *proxytest.Proxy) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ns := p.Lab.Node1.NS
	const max = 12000
	truncate := func(s string) string {
		if len(s) > max {
			return s[:max] + "\n... (truncated)"
		}
		return s
	}
	if iptablesMode() || ipvsMode() {
		var b strings.Builder
		for _, fam := range lab.Families {
			out, err := iptablesSave(ctx, p.Lab, fam)
			if err != nil {
				fmt.Fprintf(&b, "(%v)\n", err)
				continue
			}
			fmt.Fprintf(&b, "%s in node1:\n%s\n", iptablesCmd(fam, "-save"), truncate(out))
		}
		if ipvsMode() {
			for _, cmd := range [][]string{{"cat", "/proc/net/ip_vs"}, {"cat", "/proc/net/ip_vs_conn"}, {"ip", "addr", "show", "dev", "kube-ipvs0"}, {"ipset", "save"}, {"sysctl", "net.ipv4.vs.conntrack", "net.ipv4.ip_forward"}, {"conntrack", "-L"}} {
				out, err := ns.Run(ctx, cmd[0], cmd[1:]...)
				if err != nil {
					fmt.Fprintf(&b, "(%s in node1: %v)\n", strings.Join(cmd, " "), err)
				}
				fmt.Fprintf(&b, "%s in node1:\n%s\n", strings.Join(cmd, " "), truncate(out))
			}
		}
		return b.String()
	}
	out, err := ns.Run(ctx, "nft", "list", "ruleset")
	if err != nil {
		return fmt.Sprintf("(nft list ruleset in node1: %v)", err)
	}
	return "nft list ruleset in node1:\n" + truncate(out)
}

// shortName drops the lab instance prefix ("kpl-123-abcd-node1-pod1" -> "node1-pod1").
func shortName(ns string) string {
	parts := strings.SplitN(ns, "-", 4)
	if len(parts) == 4 {
		return parts[3]
	}
	return ns
}

var listAll = metav1.ListOptions{}
