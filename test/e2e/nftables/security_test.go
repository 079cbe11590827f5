package nftables

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
)

// leastCapabilities are the only capabilities the proxy needs on a node whose
// iptables is the nft backend, as here (docs/security.md): NET_ADMIN, for
// netfilter, IPVS, conntrack, links and the net.* sysctls of its namespace. (On a
// legacy-iptables node the iptables commands also need NET_RAW; the OOM score
// adjustment needs SYS_RESOURCE and is best effort without it, as upstream's.)
var leastCapabilities = []string{"net_admin"}

// capabilityBits are the bits of /proc/PID/status's capability masks
// (include/uapi/linux/capability.h).
var capabilityBits = map[string]uint{"net_admin": 12, "net_raw": 13, "sys_module": 16, "sys_resource": 24}

// permissionError matches a log line reporting a refused privilege.
var permissionError = regexp.MustCompile(`(?i)operation not permitted|permission denied|EPERM|EACCES`)

// TestLeastCapabilitiesAndServedPaths runs the proxy with exactly
// leastCapabilities (setpriv empties the bounding set but for them, so even as
// uid 0 it holds no other) and checks that it programs Services for pods and
// for outside clients with no privilege refused in its log (but the OOM score
// adjustment, best effort without SYS_RESOURCE, as upstream); then that what it
// serves keeps to its paths and never shows the API server's token: the metrics
// and state address binds 127.0.0.1 by default (unreachable from outside the
// node), the health server answers only /healthz and /livez, and no page or
// endpoint of either server contains the bearer token of its kubeconfig.
func TestLeastCapabilitiesAndServedPaths(t *testing.T) {
	l := sharedProxy(t).Lab
	o := defaultOptions()
	o.Name = "kube-proxy-least-caps"
	o.Wrapper = []string{"setpriv", "--bounding-set", "-all,+" + strings.Join(leastCapabilities, ",+"), "--inh-caps", "-all", "--"}
	withProxy(t, o, func(p *proxytest.Proxy) {
		ctx := testCtx(t, 90*time.Second)
		svc := createService(ctx, t, l, "least-caps", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.Ports = []v1.ServicePort{svcPort("tcp", v1.ProtocolTCP, 80, 80), svcPort("udp", v1.ProtocolUDP, 80, 80)}
		}, lab.PodEndpoints(l.Node2.Pods...), nil)
		client := l.Node1.Pods[0].NS
		forEachFamily(t, func(t *testing.T, fam v1.IPFamily) {
			for _, proto := range tcpUDP {
				waitAnswered(ctx, t, p, client, proto, netip.AddrPortFrom(clusterIP(t, svc, fam), 80), nil)
				np := nodePort(t, svc, strings.ToLower(string(proto)))
				waitAnswered(ctx, t, p, l.Ext, proto, netip.AddrPortFrom(l.Node1.IPs.Get(fam), np), nil)
			}
		})
		checkCapabilities(t, p)
		checkServedPaths(ctx, t, p)
	})
}

// checkCapabilities: the process holds exactly leastCapabilities, and its log
// reports no refused privilege but the OOM score's.
func checkCapabilities(t *testing.T, p *proxytest.Proxy) {
	t.Helper()
	status, err := os.ReadFile("/proc/" + strconv.Itoa(p.Process.Pid()) + "/status")
	if err != nil {
		t.Fatalf("reading the proxy's status: %v", err)
	}
	var mask uint64
	for _, c := range leastCapabilities {
		mask |= 1 << capabilityBits[c]
	}
	want := fmt.Sprintf("%016x", mask)
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) == 2 && (f[0] == "CapEff:" || f[0] == "CapBnd:") && f[1] != want {
			t.Errorf("the proxy's %s is %s, want %s (%v only): the test does not limit what it claims to", f[0], f[1], want, leastCapabilities)
		}
	}
	log, err := os.ReadFile(p.Process.LogPath)
	if err != nil {
		t.Fatalf("reading the proxy's log: %v", err)
	}
	for _, line := range strings.Split(string(log), "\n") {
		if permissionError.MatchString(line) && !strings.Contains(strings.ToLower(line), "oom") {
			t.Errorf("with only %v the proxy was refused a privilege: %s", leastCapabilities, line)
		}
	}
}

// checkServedPaths fetches every path the two servers serve, and some they must not.
func checkServedPaths(ctx context.Context, t *testing.T, p *proxytest.Proxy) {
	t.Helper()
	l := p.Lab
	served := map[string]int{
		proxytest.HealthzURL:                              http.StatusOK,
		proxytest.LivezURL:                                http.StatusOK,
		"http://127.0.0.1:10256/metrics":                  http.StatusNotFound,
		"http://127.0.0.1:10256/configz":                  http.StatusNotFound,
		"http://127.0.0.1:10256/kproxy/":                  http.StatusNotFound,
		proxytest.MetricsURL:                              http.StatusOK,
		proxytest.ModeURL:                                 http.StatusOK,
		"http://127.0.0.1:10249/configz":                  http.StatusOK,
		"http://127.0.0.1:10249/kproxy/":                  http.StatusOK,
		"http://127.0.0.1:10249/kproxy/v1alpha1/node":     http.StatusOK,
		"http://127.0.0.1:10249/kproxy/v1alpha1/verify":   http.StatusOK,
		"http://127.0.0.1:10249/kproxy/v1alpha1/services": http.StatusOK,
		// Profiling is off by default (enableProfiling), as upstream.
		"http://127.0.0.1:10249/debug/pprof/": http.StatusNotFound,
	}
	for url, want := range served {
		code, body, err := p.Get(ctx, url)
		if err != nil {
			t.Errorf("GET %s: %v", url, err)
			continue
		}
		if code != want {
			t.Errorf("GET %s: %d, want %d", url, code, want)
		}
		if strings.Contains(body, l.Token) {
			t.Errorf("GET %s shows the API server's bearer token", url)
		}
	}
	// The metrics and state address is the node's loopback only: from outside
	// the node, node1's addresses refuse it (the health server, which load
	// balancers probe, listens on every address, as upstream).
	for _, fam := range lab.Families {
		addr := netip.AddrPortFrom(l.Node1.IPs.Get(fam), 10249).String()
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := l.Ext.DialWith(dctx, &net.Dialer{}, "tcp", addr)
		cancel()
		if err == nil {
			c.Close()
			t.Errorf("the external client reached %s: the metrics and state address must bind 127.0.0.1 by default", addr)
		}
		hz := netip.AddrPortFrom(l.Node1.IPs.Get(fam), 10256).String()
		dctx, cancel = context.WithTimeout(ctx, 2*time.Second)
		c, err = l.Ext.DialWith(dctx, &net.Dialer{}, "tcp", hz)
		cancel()
		if err != nil {
			t.Errorf("the external client cannot reach the health server at %s: %v", hz, err)
		} else {
			c.Close()
		}
	}
}
