package nftables

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
)

// localhostNodePortsGate is the alpha gate (KEP-6032) of upstream's localhost
// NodePorts in nftables mode.
const localhostNodePortsGate = "featureGates:\n  KubeProxyNFTablesLocalhostNodePorts: true\n"

// TestNFTablesLocalhostNodePorts (nftables mode): with the
// KubeProxyNFTablesLocalhostNodePorts gate and nodePortAddresses including
// "localhost", a TCP NodePort answers on 127.0.0.1 and ::1 from node1 itself,
// through the userspace proxy (the endpoint sees node1's address, not loopback),
// while UDP NodePorts on loopback are rejected and counted; the NodePort still
// answers on node1's address from outside. The metrics are upstream's. Without
// loopback in nodePortAddresses, TCP on loopback is rejected and counted too.
// (Without the gate nftables mode never serves loopback: TestLocalhostNodePorts.)
func TestNFTablesLocalhostNodePorts(t *testing.T) {
	if proxyMode() != modeNFTables {
		t.Skip("nftables mode only: the gate is that of upstream's nftables proxier")
	}
	l := sharedProxy(t).Lab
	ctx := testCtx(t, 240*time.Second)
	svc := createService(ctx, t, l, "np-localhost-nft", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.Ports = []v1.ServicePort{svcPort("tcp", v1.ProtocolTCP, 80, 80), svcPort("udp", v1.ProtocolUDP, 80, 80)}
	}, lab.PodEndpoints(l.Node2.Pods...), nil)
	node := l.Node1.NS
	backends := podNames(l.Node2.Pods...)
	tcpNP, udpNP := nodePort(t, svc, "tcp"), nodePort(t, svc, "udp")

	o := defaultOptions()
	o.Name = "kube-proxy-localhost-np"
	o.ExtraConfig = localhostNodePortsGate + "nodePortAddresses:\n- localhost\n- primary\n"
	withProxy(t, o, func(p *proxytest.Proxy) {
		for _, fam := range lab.Families {
			loopback := loopbackOf(fam)
			// The NodePort is programmed on node1's address ("primary").
			waitAnswered(ctx, t, p, l.Ext, v1.ProtocolTCP, netip.AddrPortFrom(l.Node1.IPs.Get(fam), tcpNP), nil)

			to := netip.AddrPortFrom(loopback, tcpNP)
			r := waitAnswered(ctx, t, p, node, v1.ProtocolTCP, to, podIsIn(backends))
			if r.Client.Addr() != l.Node1.IPs.Get(fam) {
				t.Errorf("%s: the endpoint saw %s, want node1's address %s (the proxy's connection)", flow(node, v1.ProtocolTCP, to), r.Client.Addr(), l.Node1.IPs.Get(fam))
			}
			replies := collect(ctx, t, p, node, v1.ProtocolTCP, to, 10)
			onlyFrom(t, flow(node, v1.ProtocolTCP, to), replies, backends)

			waitOutcome(ctx, t, p, node, v1.ProtocolUDP, netip.AddrPortFrom(loopback, udpNP), lab.Refused)
		}
		waitMetrics(ctx, t, p, "the localhost NodePort metrics", map[string]metricCheck{
			`kubeproxy_nftables_localhost_nodeport_listeners{ip_family="IPv4"}`:                                                             equals(1),
			`kubeproxy_nftables_localhost_nodeport_listeners{ip_family="IPv6"}`:                                                             equals(1),
			`kubeproxy_nftables_localhost_nodeport_rejected_packets_total{ip_family="IPv4",protocol="UDP"}`:                                 atLeast(1),
			`kubeproxy_nftables_localhost_nodeport_rejected_packets_total{ip_family="IPv6",protocol="UDP"}`:                                 atLeast(1),
			`kubeproxy_nftables_localhost_nodeport_rejected_packets_total{ip_family="IPv4",protocol="SCTP"}`:                                equals(0),
			`kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total{ip_family="IPv4"}`:                                      absent,
			`kubeproxy_nftables_localhost_nodeport_rejected_packets_total{ip_family="IPv4",protocol="TCP"}`:                                 absent,
			"# TYPE kubeproxy_nftables_localhost_nodeport_listeners gauge":                                                                  present,
			"# TYPE kubeproxy_nftables_localhost_nodeport_rejected_packets_total counter":                                                   present,
			"# HELP kubeproxy_nftables_localhost_nodeport_listeners [ALPHA] Number of active localhost NodePort userspace proxy listeners.": present,
		})

		// The endpoints go away: the listener closes (TCP refused by the kernel).
		setEndpoints(ctx, t, l, svc, nil, nil)
		for _, fam := range lab.Families {
			waitOutcome(ctx, t, p, node, v1.ProtocolTCP, netip.AddrPortFrom(loopbackOf(fam), tcpNP), lab.Refused)
		}
		waitMetrics(ctx, t, p, "the localhost NodePort metrics", map[string]metricCheck{
			`kubeproxy_nftables_localhost_nodeport_listeners{ip_family="IPv4"}`: equals(0),
			`kubeproxy_nftables_localhost_nodeport_listeners{ip_family="IPv6"}`: equals(0),
		})
		setEndpoints(ctx, t, l, svc, lab.PodEndpoints(l.Node2.Pods...), nil)
	})

	t.Run("without loopback in nodePortAddresses", func(t *testing.T) {
		o := defaultOptions()
		o.Name = "kube-proxy-localhost-np-rejected"
		o.ExtraConfig = localhostNodePortsGate + "nodePortAddresses:\n- primary\n"
		withProxy(t, o, func(p *proxytest.Proxy) {
			for _, fam := range lab.Families {
				waitAnswered(ctx, t, p, l.Ext, v1.ProtocolTCP, netip.AddrPortFrom(l.Node1.IPs.Get(fam), tcpNP), nil)
				for _, proto := range tcpUDP {
					np := nodePort(t, svc, strings.ToLower(string(proto)))
					waitOutcome(ctx, t, p, node, proto, netip.AddrPortFrom(loopbackOf(fam), np), lab.Refused)
				}
			}
			waitMetrics(ctx, t, p, "the localhost NodePort metrics", map[string]metricCheck{
				`kubeproxy_nftables_localhost_nodeport_rejected_packets_total{ip_family="IPv4",protocol="TCP"}`: atLeast(1),
				`kubeproxy_nftables_localhost_nodeport_rejected_packets_total{ip_family="IPv6",protocol="TCP"}`: atLeast(1),
				`kubeproxy_nftables_localhost_nodeport_rejected_packets_total{ip_family="IPv4",protocol="UDP"}`: atLeast(1),
				`kubeproxy_nftables_localhost_nodeport_listeners{ip_family="IPv4"}`:                             absent,
			})
		})
	})
}

// podIsIn returns a reply check accepting only pods in names.
func podIsIn(names map[string]bool) func(lab.Reply) error {
	return func(r lab.Reply) error {
		if !names[r.Pod] {
			return fmt.Errorf("answered by %s, want one of %v", r.Pod, keys(names))
		}
		return nil
	}
}

// metricCheck is what waitMetrics requires of one /metrics line: a sample
// ("name{labels} value") or a "# HELP" / "# TYPE" line.
type metricCheck struct {
	absent bool                // no such line
	value  func(float64) error // for samples; nil: the line exists
}

var (
	present = metricCheck{}
	absent  = metricCheck{absent: true}
)

func equals(want float64) metricCheck {
	return metricCheck{value: func(v float64) error {
		if v != want {
			return fmt.Errorf("%v, want %v", v, want)
		}
		return nil
	}}
}

func atLeast(want float64) metricCheck {
	return metricCheck{value: func(v float64) error {
		if v < want {
			return fmt.Errorf("%v, want at least %v", v, want)
		}
		return nil
	}}
}

// waitMetrics waits until /metrics satisfies every check, keyed by the start of
// the line (a sample's name and labels, or a whole "#" line); what names them in
// a failure.
func waitMetrics(ctx context.Context, t *testing.T, p *proxytest.Proxy, what string, checks map[string]metricCheck) {
	t.Helper()
	err := p.WaitFor(ctx, what, syncTimeout, func(ctx context.Context) error {
		code, body, err := p.Get(ctx, proxytest.MetricsURL)
		if err != nil {
			return fmt.Errorf("GET /metrics: %w", err)
		}
		if code != http.StatusOK {
			return fmt.Errorf("GET /metrics: status %d", code)
		}
		for key, check := range checks {
			line := metricLine(body, key)
			switch {
			case check.absent && line != "":
				return fmt.Errorf("/metrics has %q, want no such line", line)
			case check.absent:
			case line == "":
				return fmt.Errorf("/metrics lacks %s", key)
			case check.value != nil:
				v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, key)), 64)
				if err != nil {
					return fmt.Errorf("%s: %q: %w", key, line, err)
				}
				if err := check.value(v); err != nil {
					return fmt.Errorf("%s = %w", key, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// metricLine is the line of a /metrics body that is key (a "#" line) or starts
// with key and a space (a sample), "" when there is none.
func metricLine(body, key string) string {
	for _, l := range strings.Split(body, "\n") {
		if l == key || strings.HasPrefix(l, key+" ") {
			return l
		}
	}
	return ""
}

// loopbackOf is the loopback address of fam.
func loopbackOf(fam v1.IPFamily) netip.Addr {
	if fam == v1.IPv6Protocol {
		return netip.IPv6Loopback()
	}
	return netip.MustParseAddr("127.0.0.1")
}
