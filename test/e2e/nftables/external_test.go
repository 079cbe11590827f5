package nftables

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
)

// TestNodePort: from the external client, a NodePort answers on node1's
// node-network address (the Node's InternalIP); on node1's external-link address only
// in iptables mode, as upstream's defaults differ when nodePortAddresses is unset:
// "primary" (the InternalIP only) in nftables mode, every local address in iptables
// mode. External traffic with externalTrafficPolicy Cluster is masqueraded (a node2
// backend sees node1's address).
func TestNodePort(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	ctx := testCtx(t, 90*time.Second)
	svc := createService(ctx, t, l, "np-cluster", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.Ports = []v1.ServicePort{
			svcPort("tcp", v1.ProtocolTCP, 80, 80),
			svcPort("udp", v1.ProtocolUDP, 80, 80),
		}
	}, lab.PodEndpoints(l.Node2.Pods...), nil)
	forEachFamily(t, func(t *testing.T, fam v1.IPFamily) {
		for _, proto := range tcpUDP {
			np := nodePort(t, svc, strings.ToLower(string(proto)))
			to := netip.AddrPortFrom(l.Node1.IPs.Get(fam), np)
			r := waitAnswered(ctx, t, p, l.Ext, proto, to, nil)
			if r.Client.Addr() != l.Node1.IPs.Get(fam) {
				t.Errorf("%s: backend %s saw client %s, want node1's %s (masquerade)", flow(l.Ext, proto, to), r.Pod, r.Client.Addr(), l.Node1.IPs.Get(fam))
			}
			replies := collect(ctx, t, p, l.Ext, proto, to, 10)
			onlyFrom(t, flow(l.Ext, proto, to), replies, podNames(l.Node2.Pods...))
			other := netip.AddrPortFrom(l.Plan.Node1ExtIPs.Get(fam), np)
			if iptablesMode() || ipvsMode() {
				// Unset nodePortAddresses is every local address in iptables and ipvs
				// modes.
				waitAnswered(ctx, t, p, l.Ext, proto, other, nil)
			} else if res := l.Ext.ProbeWith(ctx, lab.Probe{Protocol: proto, Target: other, Timeout: dropTimeout}); res.Outcome == lab.Answered {
				// node1's other address is not a NodePort address under "primary".
				t.Errorf("%s: answered by %s, want no NodePort on node1's external-link address (nodePortAddresses primary)\n%s", flow(l.Ext, proto, other), res.Reply.Pod, dumpRules(p))
			}
		}
	})
}

// lbService creates a LoadBalancer Service with the given mutation and sets its
// status to one load-balancer address per family.
func lbService(ctx context.Context, t *testing.T, l *lab.Lab, name string, mutate func(*v1.Service), eps []lab.Endpoint) (*v1.Service, lab.Dual[netip.Addr]) {
	t.Helper()
	n := nextLBIndex()
	ips := lab.Dual[netip.Addr]{V4: lab.LoadBalancerIP(v1.IPv4Protocol, n), V6: lab.LoadBalancerIP(v1.IPv6Protocol, n)}
	svc := createService(ctx, t, l, name, func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports = []v1.ServicePort{
			svcPort("tcp", v1.ProtocolTCP, 80, 80),
			svcPort("udp", v1.ProtocolUDP, 80, 80),
		}
		if mutate != nil {
			mutate(s)
		}
	}, eps, nil)
	svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ips.V4.String()}, {IP: ips.V6.String()}}
	out, err := l.Client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("load-balancer status of %s: %v", name, err)
	}
	return out, ips
}

// TestLoadBalancer: load-balancer ingress IPs answer from outside (masqueraded);
// loadBalancerSourceRanges admit the listed client and drop others; externalIPs
// answer from outside.
func TestLoadBalancer(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	ctx := testCtx(t, 120*time.Second)
	eps := lab.PodEndpoints(l.Node2.Pods...)
	open, openIPs := lbService(ctx, t, l, "lb-open", nil, eps)
	_ = open
	allowed, allowedIPs := lbService(ctx, t, l, "lb-allowed", func(s *v1.Service) {
		s.Spec.LoadBalancerSourceRanges = []string{l.Plan.ExtIPs.V4.String() + "/32", l.Plan.ExtIPs.V6.String() + "/128"}
	}, eps)
	_ = allowed
	_, deniedIPs := lbService(ctx, t, l, "lb-denied", func(s *v1.Service) {
		s.Spec.LoadBalancerSourceRanges = []string{"192.168.0.0/24", "2001:db8:99::/64"}
	}, eps)
	n := nextLBIndex()
	extIPs := lab.Dual[netip.Addr]{V4: lab.LoadBalancerIP(v1.IPv4Protocol, n), V6: lab.LoadBalancerIP(v1.IPv6Protocol, n)}
	createService(ctx, t, l, "externalip", func(s *v1.Service) {
		s.Spec.ExternalIPs = []string{extIPs.V4.String(), extIPs.V6.String()}
		s.Spec.Ports = []v1.ServicePort{
			svcPort("tcp", v1.ProtocolTCP, 80, 80),
			svcPort("udp", v1.ProtocolUDP, 80, 80),
		}
	}, eps, nil)
	node2Pods := podIs(l.Node2.Pods[0].Name, l.Node2.Pods[1].Name)
	forEachFamily(t, func(t *testing.T, fam v1.IPFamily) {
		for _, proto := range tcpUDP {
			for _, c := range []struct {
				what string
				ip   netip.Addr
			}{{"load-balancer IP", openIPs.Get(fam)}, {"load-balancer IP with the client in its source ranges", allowedIPs.Get(fam)}, {"external IP", extIPs.Get(fam)}} {
				to := netip.AddrPortFrom(c.ip, 80)
				r := waitAnswered(ctx, t, p, l.Ext, proto, to, node2Pods)
				if r.Client.Addr() != l.Node1.IPs.Get(fam) {
					t.Errorf("%s (%s): backend saw %s, want node1's %s (masquerade)", flow(l.Ext, proto, to), c.what, r.Client.Addr(), l.Node1.IPs.Get(fam))
				}
			}
			// The denied Service is programmed (its ClusterIP answers) yet its LB IP drops Ext.
			waitOutcome(ctx, t, p, l.Ext, proto, netip.AddrPortFrom(deniedIPs.Get(fam), 80), lab.TimedOut)
		}
	})
}

// TestExternalTrafficPolicyLocal: from outside, NodePort and load-balancer traffic
// reaches only node1's endpoints, with the client address preserved; without local
// endpoints it is dropped; the health check node port reports the local endpoints
// (200) or their absence (503).
func TestExternalTrafficPolicyLocal(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	ctx := testCtx(t, 120*time.Second)
	local := l.Node1.Pods[1]
	eps := lab.PodEndpoints(local, l.Node2.Pods[0])
	svc, lbIPs := lbService(ctx, t, l, "etp-local", func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	}, eps)
	if svc.Spec.HealthCheckNodePort == 0 {
		t.Fatalf("service %s got no healthCheckNodePort", svc.Name)
	}
	remoteOnly, remoteLB := lbService(ctx, t, l, "etp-local-none", func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	}, lab.PodEndpoints(l.Node2.Pods...))

	forEachFamily(t, func(t *testing.T, fam v1.IPFamily) {
		ext := l.Plan.ExtIPs.Get(fam)
		for _, proto := range tcpUDP {
			np := nodePort(t, svc, strings.ToLower(string(proto)))
			for _, to := range []netip.AddrPort{
				netip.AddrPortFrom(l.Node1.IPs.Get(fam), np),
				netip.AddrPortFrom(lbIPs.Get(fam), 80),
			} {
				waitAnswered(ctx, t, p, l.Ext, proto, to, nil)
				replies := collect(ctx, t, p, l.Ext, proto, to, 10)
				onlyFrom(t, flow(l.Ext, proto, to), replies, podNames(local))
				for _, r := range replies {
					if r.Client.Addr() != ext {
						t.Errorf("%s: backend saw client %s, want Ext's %s preserved", flow(l.Ext, proto, to), r.Client.Addr(), ext)
						break
					}
				}
			}
			// Internal traffic still uses every endpoint.
			cip := netip.AddrPortFrom(clusterIP(t, svc, fam), 80)
			replies := collect(ctx, t, p, l.Node1.Pods[0].NS, proto, cip, 20)
			if got := answeringPods(replies); len(got) != 2 {
				t.Errorf("%s: answered by %v, want both endpoints (internal traffic is Cluster)", flow(l.Node1.Pods[0].NS, proto, cip), got)
			}
			// No local endpoints: dropped from outside, answered from a pod.
			npNone := nodePort(t, remoteOnly, strings.ToLower(string(proto)))
			waitAnswered(ctx, t, p, l.Node1.Pods[0].NS, proto, netip.AddrPortFrom(clusterIP(t, remoteOnly, fam), 80), nil)
			for _, to := range []netip.AddrPort{netip.AddrPortFrom(l.Node1.IPs.Get(fam), npNone), netip.AddrPortFrom(remoteLB.Get(fam), 80)} {
				if !ipvsMode() {
					waitOutcome(ctx, t, p, l.Ext, proto, to, lab.TimedOut)
					continue
				}
				// Upstream's ipvs mode (kubernetes#97081) sends external traffic to
				// the cluster endpoints, unmasqueraded: on a real network the reply
				// leaves node2 from the pod's address and is dropped; in the lab
				// node2's route back is node1, where IPVS translates it, so it
				// arrives, with the client address preserved.
				r := waitAnswered(ctx, t, p, l.Ext, proto, to, podIs(l.Node2.Pods[0].Name, l.Node2.Pods[1].Name))
				if r.Client.Addr() != ext {
					t.Errorf("%s: backend saw client %s, want Ext's %s (ipvs mode does not masquerade Local traffic)", flow(l.Ext, proto, to), r.Client.Addr(), ext)
				}
			}
		}
		// Health check node port, from Ext to node1's address.
		hc := func(s *v1.Service) string {
			return "http://" + netip.AddrPortFrom(l.Node1.IPs.Get(fam), uint16(s.Spec.HealthCheckNodePort)).String() + "/healthz"
		}
		waitHealthCheck(ctx, t, p, l.Ext, hc(svc), http.StatusOK, 1)
		waitHealthCheck(ctx, t, p, l.Ext, hc(remoteOnly), http.StatusServiceUnavailable, 0)
	})
}

// waitHealthCheck waits until GET url from ns answers code with a JSON body whose
// localEndpoints is want.
func waitHealthCheck(ctx context.Context, t *testing.T, p *proxytest.Proxy, ns *lab.NS, url string, code int, want int) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: ns.Dial, DisableKeepAlives: true}, Timeout: 2 * time.Second}
	err := p.WaitFor(ctx, fmt.Sprintf("GET %s from %s: %d with localEndpoints %d", url, shortName(ns.Name), code, want), syncTimeout, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		var got struct {
			LocalEndpoints *int `json:"localEndpoints"`
		}
		jerr := json.Unmarshal(body, &got)
		if resp.StatusCode != code || jerr != nil || got.LocalEndpoints == nil || *got.LocalEndpoints != want {
			return fmt.Errorf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// TestNodePortAddresses: nodePortAddresses chooses the node addresses that serve
// NodePorts: "all" serves every local address, "primary" the Node's InternalIP only,
// CIDRs only the addresses inside them.
func TestNodePortAddresses(t *testing.T) {
	l := sharedProxy(t).Lab
	ctx := testCtx(t, 150*time.Second)
	svc := createService(ctx, t, l, "np-addrs", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.Ports = []v1.ServicePort{svcPort("tcp", v1.ProtocolTCP, 80, 80), svcPort("udp", v1.ProtocolUDP, 80, 80)}
	}, lab.PodEndpoints(l.Node2.Pods...), nil)
	cases := []struct {
		name    string
		extra   string
		nodeNet bool // NodePorts on node1's node-network address (its InternalIP)
		extLink bool // NodePorts on node1's external-link address
	}{
		{"all", "nodePortAddresses:\n- all\n", true, true},
		{"primary", "nodePortAddresses:\n- primary\n", true, false},
		{"cidrs", fmt.Sprintf("nodePortAddresses:\n- %s\n- %s\n", lab.ExternalNetwork.V4, lab.ExternalNetwork.V6), false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := defaultOptions()
			o.ExtraConfig = c.extra
			withProxy(t, o, func(p *proxytest.Proxy) {
				forEachFamily(t, func(t *testing.T, fam v1.IPFamily) {
					for _, proto := range tcpUDP {
						np := nodePort(t, svc, strings.ToLower(string(proto)))
						for _, a := range []struct {
							addr  netip.Addr
							serve bool
						}{{l.Node1.IPs.Get(fam), c.nodeNet}, {l.Plan.Node1ExtIPs.Get(fam), c.extLink}} {
							to := netip.AddrPortFrom(a.addr, np)
							if a.serve {
								waitAnswered(ctx, t, p, l.Ext, proto, to, nil)
							} else if res := l.Ext.ProbeWith(ctx, lab.Probe{Protocol: proto, Target: to, Timeout: dropTimeout}); res.Outcome == lab.Answered {
								t.Errorf("%s: answered by %s, want no NodePort there\n%s", flow(l.Ext, proto, to), res.Reply.Pod, dumpRules(p))
							}
						}
					}
				})
			})
		})
	}
}
