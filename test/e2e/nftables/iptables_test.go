package nftables

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
)

// Behaviours that differ between the modes, each checked in both: localhost
// NodePorts and the canary (iptables mode only, as upstream), and switching the mode
// on restart.

// TestLocalhostNodePorts: in iptables mode (localhostNodePorts defaults to true,
// nodePortAddresses to every local address) a NodePort answers on 127.0.0.1 from
// node1 itself, masqueraded, with net.ipv4.conf.all.route_localnet set; never on ::1
// (upstream serves IPv4 only); with localhostNodePorts false it is refused. nftables
// mode never serves NodePorts on loopback addresses without its feature gate.
func TestLocalhostNodePorts(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	ctx := testCtx(t, 120*time.Second)
	svc := createService(ctx, t, l, "np-localhost", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.Ports = []v1.ServicePort{svcPort("tcp", v1.ProtocolTCP, 80, 80), svcPort("udp", v1.ProtocolUDP, 80, 80)}
	}, lab.PodEndpoints(l.Node2.Pods...), nil)
	node := l.Node1.NS
	loopback := func(fam v1.IPFamily, np uint16) netip.AddrPort {
		if fam == v1.IPv6Protocol {
			return netip.AddrPortFrom(netip.IPv6Loopback(), np)
		}
		return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), np)
	}
	for _, proto := range tcpUDP {
		np := nodePort(t, svc, strings.ToLower(string(proto)))
		// The NodePort is programmed: it answers on node1's InternalIP from outside.
		waitAnswered(ctx, t, p, l.Ext, proto, netip.AddrPortFrom(l.Node1.IPs.V4, np), nil)
		to := loopback(v1.IPv4Protocol, np)
		if iptablesMode() {
			r := waitAnswered(ctx, t, p, node, proto, to, nil)
			if r.Client.Addr().IsLoopback() {
				t.Errorf("%s: backend saw %s, want a masqueraded source", flow(node, proto, to), r.Client.Addr())
			}
		} else {
			waitOutcome(ctx, t, p, node, proto, to, lab.Refused)
		}
		expectOutcome(ctx, t, p, node, proto, loopback(v1.IPv6Protocol, np), lab.Refused)
	}
	if !iptablesMode() {
		return
	}
	out, err := node.Run(ctx, "sysctl", "-n", "net.ipv4.conf.all.route_localnet")
	if err != nil || strings.TrimSpace(out) != "1" {
		t.Errorf("net.ipv4.conf.all.route_localnet in node1 = %q (%v), want 1", strings.TrimSpace(out), err)
	}
	// The accepted localhost NodePort packets were counted (nfacct, as upstream),
	// and the INVALID-drop counter is exported beside it.
	err = p.WaitFor(ctx, "the nfacct packet counters in /metrics", 10*time.Second, func(ctx context.Context) error {
		code, body, err := p.Get(ctx, proxytest.MetricsURL)
		if err != nil {
			return fmt.Errorf("GET /metrics: %w", err)
		}
		if code != http.StatusOK {
			return fmt.Errorf("GET /metrics: status %d", code)
		}
		if !strings.Contains(body, "\nkubeproxy_iptables_ct_state_invalid_dropped_packets_total ") {
			return errors.New("/metrics lacks kubeproxy_iptables_ct_state_invalid_dropped_packets_total")
		}
		const accepted = "\nkubeproxy_iptables_localhost_nodeports_accepted_packets_total "
		i := strings.Index(body, accepted)
		if i < 0 {
			return errors.New("/metrics lacks kubeproxy_iptables_localhost_nodeports_accepted_packets_total")
		}
		value, _, _ := strings.Cut(body[i+len(accepted):], "\n")
		if n, err := strconv.ParseFloat(value, 64); err != nil || n < 2 {
			return fmt.Errorf("kubeproxy_iptables_localhost_nodeports_accepted_packets_total = %q, want at least 2 (a TCP and a UDP flow to 127.0.0.1)", value)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	t.Run("disabled", func(t *testing.T) {
		o := defaultOptions()
		o.Name = "kube-proxy-no-localhost-np"
		o.ExtraConfig = "iptables:\n  localhostNodePorts: false\n"
		withProxy(t, o, func(p *proxytest.Proxy) {
			for _, proto := range tcpUDP {
				np := nodePort(t, svc, strings.ToLower(string(proto)))
				waitAnswered(ctx, t, p, l.Ext, proto, netip.AddrPortFrom(l.Node1.IPs.V4, np), nil)
				waitOutcome(ctx, t, p, node, proto, loopback(v1.IPv4Protocol, np), lab.Refused)
			}
		})
	})
}

// canaryReloadLog is what the canary monitor logs (at -v=2) when it noticed a flush.
const canaryReloadLog = "Reloading after iptables flush"

// TestCanary (iptables mode): when someone flushes and deletes every chain of the
// mangle, nat and filter tables of both families, the proxy notices it within a
// sync period (its KUBE-PROXY-CANARY chains are gone) and writes all its rules again.
func TestCanary(t *testing.T) {
	skipUnlessIPTablesMode(t, "the nftables mode owns its whole table and has no canary (as upstream's)")
	const syncPeriod = 3 * time.Second
	o := defaultOptions()
	o.Name = "kube-proxy-canary"
	o.ExtraConfig = fmt.Sprintf("iptables:\n  syncPeriod: %s\n", syncPeriod)
	withProxy(t, o, func(p *proxytest.Proxy) {
		l := p.Lab
		ctx := testCtx(t, 90*time.Second)
		svc := createService(ctx, t, l, "canary", nil, lab.PodEndpoints(l.Node2.Pods...), nil)
		client := l.Node1.Pods[0].NS
		for _, fam := range lab.Families {
			waitAnswered(ctx, t, p, client, v1.ProtocolTCP, netip.AddrPortFrom(clusterIP(t, svc, fam), 80), nil)
		}
		err := p.WaitFor(ctx, "the canary chains in mangle, nat and filter of both families", syncTimeout, func(ctx context.Context) error {
			for _, fam := range lab.Families {
				for _, table := range []string{"mangle", "nat", "filter"} {
					if out, err := l.Node1.NS.Run(ctx, iptablesCmd(fam, ""), "-w", "5", "-t", table, "-S", "KUBE-PROXY-CANARY"); err != nil {
						return fmt.Errorf("%s %s: %w %s", fam, table, err, out)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		reloads := countInLog(t, p, canaryReloadLog)
		flushed := time.Now()
		for _, fam := range lab.Families {
			for _, table := range []string{"mangle", "nat", "filter"} {
				for _, op := range []string{"-F", "-X"} {
					if out, err := l.Node1.NS.Run(ctx, iptablesCmd(fam, ""), "-w", "5", "-t", table, op); err != nil {
						t.Fatalf("%s -t %s %s in node1: %v %s", iptablesCmd(fam, ""), table, op, err, out)
					}
				}
			}
		}
		// Bounded by two sync periods (the canary check) plus the sync itself.
		for _, fam := range lab.Families {
			to := netip.AddrPortFrom(clusterIP(t, svc, fam), 80)
			err := p.WaitFor(ctx, flow(client, v1.ProtocolTCP, to)+" answered again after the flush", 2*syncPeriod+syncTimeout, func(ctx context.Context) error {
				if res := client.ProbeWith(ctx, lab.Probe{Protocol: v1.ProtocolTCP, Target: to, Timeout: probeTimeout}); res.Outcome != lab.Answered {
					return fmt.Errorf("probe: %s", res)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("%v\n%s", err, dumpRules(p))
			}
		}
		t.Logf("rules back %s after the flush", time.Since(flushed).Round(10*time.Millisecond))
		if got := countInLog(t, p, canaryReloadLog); got < reloads+len(lab.Families) {
			t.Errorf("the proxy logged %q %d times since the flush, want once per family (the rules came back some other way?)", canaryReloadLog, got-reloads)
		}
		if err := modeState(ctx, l, modeIPTables); err != nil {
			t.Error(err)
		}
	})
}

// skipUnlessIPTablesMode skips t unless the suite runs against the iptables mode.
func skipUnlessIPTablesMode(t *testing.T, why string) {
	t.Helper()
	if !iptablesMode() {
		t.Skip("iptables mode only: " + why)
	}
}

// countInLog counts the lines of the proxy's log containing s.
func countInLog(t *testing.T, p *proxytest.Proxy, s string) int {
	t.Helper()
	b, err := os.ReadFile(p.Process.LogPath)
	if err != nil {
		t.Fatalf("reading the proxy's log: %v", err)
	}
	return strings.Count(string(b), s)
}

// TestModeSwitch: restarting the proxy in the other mode removes the previous mode's
// rules (upstream's platformCleanup) while Services keep answering, and switching
// back removes the other mode's rules again.
func TestModeSwitch(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	ctx := testCtx(t, 120*time.Second)
	svc := createService(ctx, t, l, "mode-switch", nil, lab.PodEndpoints(l.Node2.Pods...), nil)
	client := l.Node1.Pods[0].NS
	answered := func(t *testing.T, p *proxytest.Proxy) {
		t.Helper()
		for _, fam := range lab.Families {
			waitAnswered(ctx, t, p, client, v1.ProtocolTCP, netip.AddrPortFrom(clusterIP(t, svc, fam), 80), nil)
		}
	}
	answered(t, p)
	waitModeState(ctx, t, p, proxyMode())
	t.Run("to-"+otherMode(), func(t *testing.T) {
		o := defaultOptions()
		o.Name = "kube-proxy-" + otherMode()
		o.Mode = otherMode()
		withProxy(t, o, func(p *proxytest.Proxy) {
			answered(t, p)
			waitModeState(ctx, t, p, otherMode())
		})
	})
	// The subtest's end restored the suite's proxy in its own mode.
	p = sharedProxy(t)
	answered(t, p)
	waitModeState(ctx, t, p, proxyMode())
}
