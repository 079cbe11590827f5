//go:build linux

package localnodeports

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/nftnetlink"
	render "github.com/kproxy/kproxy/internal/render/nftables"
	"github.com/kproxy/kproxy/internal/testing/roottest"
)

// testNS is a private network namespace (prefix kpl-) created for one test and
// deleted when it ends, also on failure. Nothing runs in the root namespace.
type testNS struct {
	name   string
	handle netns.NsHandle
}

func newTestNS(t *testing.T) *testNS {
	t.Helper()
	roottest.Require(t, "binds loopback NodePorts and programs nftables in a private network namespace", "ip", "nft")
	var r [4]byte
	_, _ = rand.Read(r[:])
	n := &testNS{name: fmt.Sprintf("kpl-%d-lnp-%s", os.Getpid(), hex.EncodeToString(r[:]))}
	if out, err := exec.Command("ip", "netns", "add", n.name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v\n%s", n.name, err, out)
	}
	t.Cleanup(func() {
		if n.handle.IsOpen() {
			_ = n.handle.Close()
		}
		if out, err := exec.Command("ip", "netns", "del", n.name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", n.name, err, out)
		}
	})
	h, err := netns.GetFromName(n.name)
	if err != nil {
		t.Fatalf("opening netns %s: %v", n.name, err)
	}
	n.handle = h
	// Loopback up, with the "pod" endpoints' addresses (not loopback ones).
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", "10.99.0.1/32", "dev", "lo"},
		{"-6", "addr", "add", "fd99::1/128", "dev", "lo", "nodad"},
	} {
		if out, err := exec.Command("ip", append([]string{"-n", n.name}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip -n %s %s: %v\n%s", n.name, strings.Join(args, " "), err, out)
		}
	}
	return n
}

// do runs fn on an OS thread switched into the namespace; the sockets fn creates
// stay in it. fn runs on its own goroutine, so a thread that cannot switch back
// dies with it.
func (n *testNS) do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(n.handle); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(ferr, err) // the thread stays locked and exits
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

func (n *testNS) listen(ctx context.Context, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := n.do(func() (err error) {
		l, err = (&net.ListenConfig{}).Listen(ctx, network, addr)
		return err
	})
	return l, err
}

func (n *testNS) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.do(func() (err error) {
		c, err = (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

func (n *testNS) nft(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", n.name, "nft"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("nft %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

var packetsRE = regexp.MustCompile(`packets (\d+)`)

// counter returns the packets of the kube-proxy table's named counter in family.
func (n *testNS) counter(t *testing.T, family knftables.Family, name string) int {
	t.Helper()
	m := packetsRE.FindStringSubmatch(n.nft(t, "list", "counter", string(family), render.TableName, name))
	if m == nil {
		t.Fatalf("no packets in the listing of counter %s", name)
	}
	v, _ := strconv.Atoi(m[1])
	return v
}

// serveBackend answers each connection with "backend <client address>\n" and then
// echoes what it reads.
func serveBackend(t *testing.T, ns *testNS, addr string) {
	t.Helper()
	l, err := ns.listen(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := fmt.Fprintf(c, "backend %s\n", c.RemoteAddr()); err != nil {
					return
				}
				_, _ = io.Copy(c, c)
			}()
		}
	}()
}

// programTable writes the full ruleset of views for family, with localhost NodePorts
// l, into the namespace through the netlink writer kproxy uses.
func programTable(t *testing.T, ns *testNS, family knftables.Family, l render.LocalhostNodePorts, views []*model.ServicePortView) {
	t.Helper()
	cfg := &render.Config{Family: family, MasqueradeBit: 14, LocalhostNodePorts: l,
		NodePortAddresses: model.NodePortAddresses{IPs: []netip.Addr{netip.MustParseAddr("10.99.0.1")}}}
	if family == knftables.IPv6Family {
		cfg.NodePortAddresses.IPs = []netip.Addr{netip.MustParseAddr("fd99::1")}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ex, err := nftnetlink.New(family, render.TableName, nftnetlink.Options{NetNSPath: "/run/netns/" + ns.name})
	if err != nil {
		t.Fatal(err)
	}
	base := render.RenderBase(cfg)
	st := render.NewState(&base, render.RenderServices(cfg, views))
	tx := ex.NewTransaction()
	render.WriteFull(tx, st)
	if err := ex.Run(context.Background(), tx); err != nil {
		t.Fatalf("programming the %s table: %v", family, err)
	}
}

// kernelViews: TCP NodePort 30080 and UDP NodePort 30053 of one Service, with the
// endpoint of family.
func kernelViews(family v1.IPFamily) []*model.ServicePortView {
	epAddr := "10.99.0.1:8080"
	if family == v1.IPv6Protocol {
		epAddr = "[fd99::1]:8080"
	}
	tcp := nodePortView("web", v1.ProtocolTCP, 30080, ep(epAddr, true))
	udp := nodePortView("web", v1.ProtocolUDP, 30053, ep(epAddr, true))
	udp.Name.Port = "dns"
	if family == v1.IPv6Protocol {
		tcp.ClusterIP, udp.ClusterIP = netip.MustParseAddr("fd30::1"), netip.MustParseAddr("fd30::1")
	}
	return []*model.ServicePortView{tcp, udp}
}

// readGreeting dials addr from inside ns and returns the backend's first line.
func readGreeting(ctx context.Context, ns *testNS, addr string) (string, error) {
	c, err := ns.dial(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// udpRefused sends a datagram to addr from inside ns and reports whether the
// answer was an ICMP port unreachable (ECONNREFUSED on the connected socket).
func udpRefused(t *testing.T, ns *testNS, addr string) bool {
	t.Helper()
	c, err := ns.dial(context.Background(), "udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("x")); err != nil {
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	_, err = c.Read(make([]byte, 16))
	return errors.Is(err, syscall.ECONNREFUSED)
}

// TestKernelLocalhostNodePorts runs, in a private network namespace, what kproxy
// runs on a node with the gate on and nodePortAddresses including loopback: the
// rendered table (netlink writer) and a Manager per family. From the node, TCP to
// 127.0.0.1:<nodePort> and [::1]:<nodePort> reaches the endpoint through the
// listener; UDP to the loopback NodePort is rejected by the table and counted. Then,
// without the proxy (gate on, loopback not in nodePortAddresses), TCP is rejected
// and counted too, even though something listens on the port.
func TestKernelLocalhostNodePorts(t *testing.T) {
	ns := newTestNS(t)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	families := []struct {
		family   v1.IPFamily
		nft      knftables.Family
		loopback string
		endpoint string
	}{
		{v1.IPv4Protocol, knftables.IPv4Family, "127.0.0.1", "10.99.0.1:8080"},
		{v1.IPv6Protocol, knftables.IPv6Family, "::1", "[fd99::1]:8080"},
	}
	for _, f := range families {
		serveBackend(t, ns, f.endpoint)
		views := kernelViews(f.family)
		programTable(t, ns, f.nft, render.LocalhostNodePorts{Enabled: true, Proxied: true}, views)

		metrics := &fakeMetrics{}
		m := New(Config{Family: f.family, Metrics: metrics, Listen: ns.listen, Dial: ns.dial})
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- m.Run(runCtx) }()
		t.Cleanup(func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("%s: Run: %v", f.family, err)
			}
		})
		fake := &Fake{}
		tracker := NewTracker(f.family, fakeViewsOf(views), fake)
		tracker.Synced(true, nil, nil)
		specs, _ := fake.Last()
		if len(specs) != 1 || specs[0].NodePort != 30080 {
			t.Fatalf("%s: listeners %+v, want the TCP NodePort only", f.family, specs)
		}
		m.Sync(specs)

		to := net.JoinHostPort(f.loopback, "30080")
		var greeting string
		var err error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if greeting, err = readGreeting(ctx, ns, to); err == nil {
				break
			}
		}
		if err != nil || !strings.HasPrefix(greeting, "backend ") {
			t.Fatalf("%s: TCP %s: %q, %v; want the endpoint's greeting", f.family, to, greeting, err)
		}
		// The manager sets the gauge after the reconcile that started the listener,
		// so the greeting can arrive first: wait for it, bounded.
		n, failures := metrics.last()
		for deadline := time.Now().Add(5 * time.Second); n != 1 && time.Now().Before(deadline); n, failures = metrics.last() {
			time.Sleep(10 * time.Millisecond)
		}
		if n != 1 || failures != 0 {
			t.Errorf("%s: listeners gauge %d, failures %d; want 1 and 0", f.family, n, failures)
		}

		udp := render.LocalhostNodePortRejectedCounter(v1.ProtocolUDP)
		before := ns.counter(t, f.nft, udp)
		if !udpRefused(t, ns, net.JoinHostPort(f.loopback, "30053")) {
			t.Errorf("%s: UDP to the loopback NodePort was not rejected", f.family)
		}
		if after := ns.counter(t, f.nft, udp); after != before+1 {
			t.Errorf("%s: counter %s went from %d to %d, want +1", f.family, udp, before, after)
		}
		if out := ns.nft(t, "list", "counters", "table", string(f.nft), render.TableName); strings.Contains(out, "rejected-tcp") {
			t.Errorf("%s: a TCP reject counter although the proxy serves TCP:\n%s", f.family, out)
		}
	}

	// Without the proxy, TCP is rejected and counted, whoever listens on the port:
	// the IPv4 Manager above still does.
	tcpCounter := render.LocalhostNodePortRejectedCounter(v1.ProtocolTCP)
	programTable(t, ns, knftables.IPv4Family, render.LocalhostNodePorts{Enabled: true}, kernelViews(v1.IPv4Protocol))
	if _, err := readGreeting(ctx, ns, "127.0.0.1:30080"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("TCP to 127.0.0.1:30080 without the proxy: %v, want connection refused", err)
	}
	if n := ns.counter(t, knftables.IPv4Family, tcpCounter); n < 1 {
		t.Errorf("counter %s = %d after a rejected connection", tcpCounter, n)
	}
}

func fakeViewsOf(views []*model.ServicePortView) fakeViews {
	out := fakeViews{}
	for _, v := range views {
		out[v.Name] = v
	}
	return out
}
