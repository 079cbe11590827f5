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

	"github.com/kproxy/kproxy/internal/inspect"
	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
)

// traceCase is one real packet and the `kube-proxy trace` of the same 5-tuple.
type traceCase struct {
	name  string
	from  *lab.NS
	src   netip.Addr // the sender's address, as node1 sees the packet arrive
	iif   string     // the interface it arrives on in node1; "" from node1 itself
	proto v1.Protocol
	to    netip.AddrPort
	// want is what the client sees: Answered, Refused (REJECT) or TimedOut (DROP);
	// notAnswered accepts any outcome but an answer (the trace must say ACCEPT
	// without DNAT: nothing of the proxy's touches the packet).
	want        lab.Outcome
	notAnswered bool
	// pods, when set, are the only pods that may answer.
	pods map[string]bool
	// single: the trace must name exactly one endpoint (session affinity: the
	// kernel's memory of the client, nftables mode's affinity sets, iptables
	// mode's -m recent lists or ipvs mode's persistence templates, is read with
	// the ruleset).
	single bool
}

// runTraceTool runs `kube-proxy trace ... -o json` in node1, where the proxy runs.
func runTraceTool(ctx context.Context, p *proxytest.Proxy, c *traceCase) (*inspect.Trace, string, error) {
	bin, err := proxytest.Binary()
	if err != nil {
		return nil, "", err
	}
	dst := c.to.String() + "/" + strings.ToLower(string(c.proto))
	args := []string{"trace", "--src", c.src.String(), "--dst", dst}
	if c.iif != "" {
		args = append(args, "--iif", c.iif)
	}
	out, err := p.Lab.Node1.NS.Run(ctx, bin, append(args, "-o", "json")...)
	if err != nil {
		return nil, "", fmt.Errorf("kube-proxy %s: %w: %s", strings.Join(args, " "), err, out)
	}
	var doc inspect.Trace
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, "", fmt.Errorf("decoding kube-proxy trace's output: %w: %s", err, out)
	}
	table, err := p.Lab.Node1.NS.Run(ctx, bin, args...)
	if err != nil {
		return nil, "", fmt.Errorf("kube-proxy %s: %w: %s", strings.Join(args, " "), err, table)
	}
	return &doc, table, nil
}

// podAddr maps every pod address of the lab to its pod.
func podAddr(l *lab.Lab) map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for _, pod := range l.Pods {
		for _, ip := range pod.Endpoint().IPs {
			out[ip] = pod.Name
		}
	}
	return out
}

// checkTrace sends c's packet for real, then traces it, and compares: the
// endpoint that answered is one the trace DNATs to (with the masquerade the
// backend saw), a refused connection is a REJECT, a timed-out one a DROP.
func checkTrace(ctx context.Context, t *testing.T, p *proxytest.Proxy, c *traceCase) {
	t.Helper()
	var reply lab.Reply
	switch {
	case c.notAnswered:
		err := p.WaitFor(ctx, flow(c.from, c.proto, c.to)+" not answered", syncTimeout, func(ctx context.Context) error {
			res := c.from.ProbeWith(ctx, lab.Probe{Protocol: c.proto, Target: c.to, Timeout: dropTimeout})
			if res.Outcome == lab.Answered {
				return fmt.Errorf("answered by %s", res.Reply.Pod)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	case c.want == lab.Refused && ipvsMode():
		// IPVS answers ICMP port unreachable itself, rate-limited: a probe right
		// after another times out.
		waitNotAnswered(ctx, t, p, c.from, c.proto, c.to)
	case c.want == lab.Answered:
		check := func(r lab.Reply) error { return nil }
		if c.pods != nil {
			check = podIs(keys(c.pods)...)
		}
		reply = waitAnswered(ctx, t, p, c.from, c.proto, c.to, check)
	default:
		waitOutcome(ctx, t, p, c.from, c.proto, c.to, c.want)
	}

	doc, table, err := runTraceTool(ctx, p, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-proxy trace --src %s --dst %s/%s --iif %q:\n%s", c.src, c.to, strings.ToLower(string(c.proto)), c.iif, table)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s: %s\nkube-proxy trace:\n%s", flow(c.from, c.proto, c.to), fmt.Sprintf(format, args...), table)
	}
	if doc.Kind != "Trace" || doc.Mode != proxyMode() || len(doc.Outcomes) == 0 {
		fail("document kind %q mode %q with %d outcomes, want a Trace of mode %s", doc.Kind, doc.Mode, len(doc.Outcomes), proxyMode())
		return
	}
	switch {
	case c.notAnswered:
		if doc.Verdict != "ACCEPT" || doc.Outcomes[0].DNAT != "" {
			fail("verdict %s, DNAT %q: want ACCEPT, untranslated (no rule of the proxy's applies)", doc.Verdict, doc.Outcomes[0].DNAT)
		}
	case c.want == lab.Refused:
		if doc.Verdict != "REJECT" {
			fail("verdict %s, want REJECT (the client was refused)", doc.Verdict)
		}
	case c.want == lab.TimedOut:
		if doc.Verdict != "DROP" {
			fail("verdict %s, want DROP (the client timed out)", doc.Verdict)
		}
	default:
		checkAnsweredTrace(t, p, c, doc, reply, fail)
	}
}

// checkAnsweredTrace: the answering pod's address is among the trace's DNAT
// targets, and that path's masquerade is what the backend saw.
func checkAnsweredTrace(t *testing.T, p *proxytest.Proxy, c *traceCase, doc *inspect.Trace, reply lab.Reply, fail func(string, ...any)) {
	t.Helper()
	if doc.Verdict != "ACCEPT" {
		fail("verdict %s, want ACCEPT (the client was answered by %s)", doc.Verdict, reply.Pod)
		return
	}
	owner := podAddr(p.Lab)
	var hit *inspect.TraceOutcome
	for i := range doc.Outcomes {
		o := &doc.Outcomes[i]
		target, err := netip.ParseAddrPort(o.DNAT)
		if err != nil {
			fail("outcome %d: DNAT %q is not an endpoint", i+1, o.DNAT)
			return
		}
		if owner[target.Addr()] == reply.Pod {
			hit = o
		}
		if o.Endpoint == nil {
			fail("outcome %d: DNAT %s is no endpoint of the destination's Service ports", i+1, o.DNAT)
		} else if o.Endpoint.Endpoint.Internal != inspect.Used && o.Endpoint.Endpoint.External != inspect.Used &&
			o.Endpoint.Endpoint.ExternalFromNode != inspect.Used {
			fail("outcome %d: endpoint %s is used by no traffic in the model", i+1, o.DNAT)
		}
	}
	if hit == nil {
		fail("pod %s answered; the trace does not DNAT to it", reply.Pod)
		return
	}
	if c.single && len(doc.Outcomes) != 1 {
		fail("%d outcomes, want exactly the affinity endpoint %s", len(doc.Outcomes), reply.Pod)
	}
	// From node1 itself the source the kernel picks may be the address
	// masquerading would pick: masquerade is observable only for other senders.
	if c.iif != "" {
		if masq := reply.Client.Addr() != c.src; masq != hit.Masquerade {
			fail("backend %s saw client %s (sender %s): masquerade %v, the trace says %v", reply.Pod, reply.Client, c.src, masq, hit.Masquerade)
		}
	}
	if len(doc.Destination.Matches) == 0 {
		fail("the destination is no Service port in the trace's document")
	}
}

// TestTrace: `kube-proxy trace` in node1 agrees with real packets, in every mode:
// for each case a packet is sent from a pod, the node or the external client,
// then the same 5-tuple is traced against the kernel's live ruleset.
func TestTrace(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	if len(l.Node1.Pods) < 3 || len(l.Node2.Pods) < 2 {
		t.Fatalf("the lab needs three pods on node1 and two on node2, has %d and %d", len(l.Node1.Pods), len(l.Node2.Pods))
	}
	ctx := testCtx(t, 6*time.Minute)
	remote := lab.PodEndpoints(l.Node2.Pods...)
	node2Pods := podNames(l.Node2.Pods...)
	local, other, self := l.Node1.Pods[0], l.Node1.Pods[1], l.Node1.Pods[2]
	tcpUDPPorts := func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{svcPort("tcp", v1.ProtocolTCP, 80, 80), svcPort("udp", v1.ProtocolUDP, 80, 80)}
	}

	lb, lbIPs := lbService(ctx, t, l, "trace-lb", func(s *v1.Service) {
		s.Spec.LoadBalancerSourceRanges = []string{l.Plan.ExtIPs.V4.String() + "/32", l.Plan.ExtIPs.V6.String() + "/128"}
	}, remote)
	_, deniedIPs := lbService(ctx, t, l, "trace-lb-denied", func(s *v1.Service) {
		s.Spec.LoadBalancerSourceRanges = []string{"192.168.0.0/24", "2001:db8:99::/64"}
	}, remote)
	n := nextLBIndex()
	extIPs := lab.Dual[netip.Addr]{V4: lab.LoadBalancerIP(v1.IPv4Protocol, n), V6: lab.LoadBalancerIP(v1.IPv6Protocol, n)}
	createService(ctx, t, l, "trace-extip", func(s *v1.Service) {
		tcpUDPPorts(s)
		s.Spec.ExternalIPs = []string{extIPs.V4.String(), extIPs.V6.String()}
	}, remote, nil)
	empty := createService(ctx, t, l, "trace-empty", tcpUDPPorts, nil, nil)
	etp := createService(ctx, t, l, "trace-etp-local", func(s *v1.Service) {
		tcpUDPPorts(s)
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	}, lab.PodEndpoints(local, l.Node2.Pods[0]), nil)
	etpRemote := createService(ctx, t, l, "trace-etp-remote", func(s *v1.Service) {
		tcpUDPPorts(s)
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	}, remote, nil)
	itp := createService(ctx, t, l, "trace-itp-local", func(s *v1.Service) {
		tcpUDPPorts(s)
		s.Spec.InternalTrafficPolicy = new(v1.ServiceInternalTrafficPolicy)
		*s.Spec.InternalTrafficPolicy = v1.ServiceInternalTrafficPolicyLocal
	}, lab.PodEndpoints(local, l.Node2.Pods[0], l.Node2.Pods[1]), nil)
	hairpin := createService(ctx, t, l, "trace-hairpin", tcpUDPPorts, lab.PodEndpoints(self), nil)
	affinity := createService(ctx, t, l, "trace-affinity", func(s *v1.Service) {
		tcpUDPPorts(s)
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	}, remote, nil)

	ext := func(fam v1.IPFamily) netip.Addr { return l.Plan.ExtIPs.Get(fam) }
	ip := func(svc *v1.Service, fam v1.IPFamily) netip.Addr { return clusterIP(t, svc, fam) }
	np := func(svc *v1.Service, fam v1.IPFamily, name string) netip.AddrPort {
		return netip.AddrPortFrom(l.Node1.IPs.Get(fam), nodePort(t, svc, name))
	}
	// An unallocated address of the ServiceCIDR: the last one.
	unallocated := func(fam v1.IPFamily) netip.Addr {
		b := lab.ServiceCIDRs.Get(fam).Addr().AsSlice()
		b[len(b)-1] = 0xfe
		a, _ := netip.AddrFromSlice(b)
		return a
	}
	var cases []traceCase
	for _, fam := range lab.Families {
		f := string(fam)
		fromPod := func(name string, proto v1.Protocol, to netip.AddrPort, want lab.Outcome, pods map[string]bool) traceCase {
			return traceCase{name: name + "/" + f, from: other.NS, src: other.IPs.Get(fam), iif: other.HostIf,
				proto: proto, to: to, want: want, pods: pods}
		}
		fromExt := func(name string, proto v1.Protocol, to netip.AddrPort, want lab.Outcome, pods map[string]bool) traceCase {
			return traceCase{name: name + "/" + f, from: l.Ext, src: ext(fam), iif: "ext0", proto: proto, to: to, want: want, pods: pods}
		}
		unalloc := fromPod("unallocated-clusterip", v1.ProtocolTCP, netip.AddrPortFrom(unallocated(fam), 80), lab.TimedOut, nil)
		if iptablesMode() || ipvsMode() {
			// Upstream's iptables and ipvs modes have no rule for the ServiceCIDR:
			// the packet leaves the node untouched (and nothing answers it).
			unalloc.notAnswered = true
		}
		cases = append(cases,
			fromPod("clusterip-tcp", v1.ProtocolTCP, netip.AddrPortFrom(ip(lb, fam), 80), lab.Answered, node2Pods),
			fromPod("clusterip-udp", v1.ProtocolUDP, netip.AddrPortFrom(ip(lb, fam), 80), lab.Answered, node2Pods),
			fromExt("nodeport", v1.ProtocolTCP, np(lb, fam, "tcp"), lab.Answered, node2Pods),
			fromExt("loadbalancer-allowed", v1.ProtocolTCP, netip.AddrPortFrom(lbIPs.Get(fam), 80), lab.Answered, node2Pods),
			fromExt("loadbalancer-denied", v1.ProtocolTCP, netip.AddrPortFrom(deniedIPs.Get(fam), 80), lab.TimedOut, nil),
			fromExt("externalip", v1.ProtocolUDP, netip.AddrPortFrom(extIPs.Get(fam), 80), lab.Answered, node2Pods),
			fromPod("no-endpoints", v1.ProtocolTCP, netip.AddrPortFrom(ip(empty, fam), 80), lab.Refused, nil),
			unalloc,
			traceCase{name: "hairpin/" + f, from: self.NS, src: self.IPs.Get(fam), iif: self.HostIf, proto: v1.ProtocolTCP,
				to: netip.AddrPortFrom(ip(hairpin, fam), 80), want: lab.Answered, pods: podNames(self)},
		)
	}
	v4 := v1.IPv4Protocol
	affinityCase := traceCase{name: "session-affinity/IPv4", from: other.NS, src: other.IPs.V4, iif: other.HostIf, proto: v1.ProtocolTCP,
		to: netip.AddrPortFrom(ip(affinity, v4), 80), want: lab.Answered, pods: node2Pods, single: true}
	etpWithout := traceCase{name: "etp-local-without-local-endpoint/IPv4", from: l.Ext, src: ext(v4), iif: "ext0", proto: v1.ProtocolTCP,
		to: np(etpRemote, v4, "tcp"), want: lab.TimedOut}
	if ipvsMode() {
		// Upstream's ipvs mode forwards to the cluster's endpoints, unmasqueraded
		// (kubernetes#97081); in the lab the reply comes back through node1.
		etpWithout.want, etpWithout.pods = lab.Answered, node2Pods
	}
	cases = append(cases,
		traceCase{name: "clusterip-from-node/IPv4", from: l.Node1.NS, src: l.Node1.IPs.V4, proto: v1.ProtocolTCP,
			to: netip.AddrPortFrom(ip(lb, v4), 80), want: lab.Answered, pods: node2Pods},
		traceCase{name: "etp-local-with-local-endpoint/IPv4", from: l.Ext, src: ext(v4), iif: "ext0", proto: v1.ProtocolTCP,
			to: np(etp, v4, "tcp"), want: lab.Answered, pods: podNames(local)},
		etpWithout,
		traceCase{name: "itp-local/IPv4", from: other.NS, src: other.IPs.V4, iif: other.HostIf, proto: v1.ProtocolUDP,
			to: netip.AddrPortFrom(ip(itp, v4), 80), want: lab.Answered, pods: podNames(local)},
		affinityCase,
	)
	t.Logf("%d packet cases in %s mode", len(cases), proxyMode())
	for i := range cases {
		c := &cases[i]
		t.Run(c.name, func(t *testing.T) { checkTrace(ctx, t, p, c) })
	}

	t.Run("table-and-errors", func(t *testing.T) {
		bin, err := proxytest.Binary()
		if err != nil {
			t.Fatal(err)
		}
		out, err := l.Node1.NS.Run(ctx, bin, "trace", "--src", other.IPs.V4.String(), "--iif", other.HostIf,
			"--dst", netip.AddrPortFrom(ip(lb, v4), 80).String())
		if err != nil || !strings.Contains(out, "Verdict: ACCEPT, DNAT to 2 endpoints") || !strings.Contains(out, "Service default/trace-lb port tcp as its ClusterIP") {
			t.Errorf("kube-proxy trace (table): %v\n%s", err, out)
		}
		out, err = l.Node1.NS.Run(ctx, bin, "trace", "--src", "10.0.0.1", "--dst", "fd00::1:80")
		if err == nil || !strings.Contains(out, "--dst") {
			t.Errorf("kube-proxy trace with a bad --dst: %v\n%s", err, out)
		}
	})
}
