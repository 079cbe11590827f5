package ipvs

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/kproxy/kproxy/internal/dataplane/dptest"
	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/ipvs"
	"github.com/kproxy/kproxy/internal/ipvs/dummy"
	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/render/rendertest"
	"github.com/kproxy/kproxy/internal/testing/netnsexec"
	"github.com/kproxy/kproxy/internal/testing/roottest"
)

// inNetns runs fn on a thread in the network namespace ns (sockets it opens stay
// there).
func inNetns(t *testing.T, ns string, fn func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		h, err := netns.GetFromName(ns)
		if err != nil {
			errc <- err
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// serve answers every TCP connection to addr in ns with name and a newline.
func serve(t *testing.T, ns, addr, name string) {
	t.Helper()
	var l net.Listener
	err := inNetns(t, ns, func() error {
		var err error
		l, err = net.Listen("tcp4", addr)
		return err
	})
	if err != nil {
		t.Fatalf("listening on %s in %s: %v", addr, ns, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = fmt.Fprintln(c, name)
			_ = c.Close()
		}
	}()
}

// ask connects to addr from ns and returns the first line answered.
func ask(t *testing.T, ns, addr string) (string, error) {
	t.Helper()
	var answer string
	err := inNetns(t, ns, func() error {
		c, err := net.DialTimeout("tcp4", addr, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		answer, err = bufio.NewReader(c).ReadString('\n')
		return err
	})
	return strings.TrimSpace(answer), err
}

func mustRun(t *testing.T, ns string, args ...string) {
	t.Helper()
	if _, err := rendertest.RunIn(ns, nil, args...); err != nil {
		t.Fatal(err)
	}
}

// TestKernelClusterIPTraffic: the proxier over the real kernel (IPVS, kube-ipvs0,
// ipsets, iptables) in a node namespace, with a pod namespace behind a veth: a
// connection from the node to a ClusterIP reaches the endpoint, an endpoint change
// moves it, and a full sync that finds the kernel as applied writes nothing but
// the rules. It runs where the kernel has IPVS (make vm-test: Debian's 6.1).
func TestKernelClusterIPTraffic(t *testing.T) {
	roottest.Require(t, "creates network namespaces with IPVS virtual servers, ipsets and iptables rules", "ip", "ipset")
	node, pod := rendertest.Netns(t, "ipvsnode"), rendertest.Netns(t, "ipvspod")
	path := "/run/netns/" + node
	h := ipvs.New(path)
	t.Cleanup(func() { _ = h.Close() })
	if err := h.Available(); err != nil {
		t.Skipf("kernel has no IP_VS: %v", err)
	}
	backend := rendertest.IptablesBackends(t, v1.IPv4Protocol)[0]
	for _, ns := range []string{node, pod} {
		mustRun(t, ns, "ip", "link", "set", "lo", "up")
	}
	mustRun(t, node, "ip", "link", "add", "veth0", "type", "veth", "peer", "name", "eth0", "netns", pod)
	mustRun(t, node, "ip", "addr", "add", "192.0.2.1/24", "dev", "veth0")
	mustRun(t, node, "ip", "link", "set", "veth0", "up")
	mustRun(t, pod, "ip", "addr", "add", "192.0.2.2/24", "dev", "eth0")
	mustRun(t, pod, "ip", "link", "set", "eth0", "up")
	mustRun(t, pod, "ip", "route", "add", "default", "via", "192.0.2.1")
	// What the daemon sets at start (app.ipvsSysctls), in the node namespace.
	mustRun(t, node, "sysctl", "-qw", "net.ipv4.vs.conntrack=1", "net.ipv4.ip_forward=1")
	serve(t, pod, "192.0.2.2:8080", "first")
	serve(t, pod, "192.0.2.2:8081", "second")

	parts := dptest.NewParts(t, "ipvs", dptest.NodeName)
	lk := dummy.New(path)
	t.Cleanup(func() { _ = lk.Close() })
	cfg := Config{
		Config: parts.CoreConfig(),
		Render: testRenderConfig(),
		IPVS:   h,
		IPSet:  ipset.New(netnsexec.Exec{NS: node}),
		Link:   lk,
		IPT:    iptables.New(netnsexec.Exec{NS: node}, v1.IPv4Protocol, iptables.Backend(backend)),
	}
	cfg.Render.NodePortAddresses = model.NodePortAddresses{IPs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}}
	cfg.Render.NodeIP = netip.MustParseAddr("192.0.2.1")
	cfg.Graceful = ipvs.NewGracefulTermination(h, clock.RealClock{}, 0)
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sync := func(what string) {
		t.Helper()
		if _, err := p.Sync(context.Background()); err != nil {
			t.Fatalf("%s: Sync: %v", what, err)
		}
	}
	st := parts.State
	st.OnServiceAdd(dptest.Service("ns1", "web", "172.30.0.10", dptest.WithPort("http", v1.ProtocolTCP, 80, 8080)))
	first := dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("192.0.2.2", "node-b"))
	st.AddEndpointSlice(first)
	sync("first sync")
	if got, err := ask(t, node, "172.30.0.10:80"); err != nil || got != "first" {
		t.Fatalf("ClusterIP from the node after the first sync: %q, %v; want first", got, err)
	}

	st.UpdateEndpointSlice(first, dptest.Slice("ns1", "web", "web-1", 8081, "http", v1.ProtocolTCP, dptest.Ready("192.0.2.2", "node-b")))
	sync("endpoint change")
	if got, err := ask(t, node, "172.30.0.10:80"); err != nil || got != "second" {
		t.Errorf("ClusterIP from the node after the endpoint changed: %q, %v; want second", got, err)
	}

	p.RequestFullSync()
	sync("full sync")
	if r := p.Inspectable().Syncs()[0]; !r.Full || r.Operations != 1 {
		t.Errorf("a full sync over the kernel as applied: full=%t, %d operations, want only the rules restored (1)", r.Full, r.Operations)
	}

	kernelDriftRepaired(t, p, node, backend)
	if got, err := ask(t, node, "172.30.0.10:80"); err != nil || got != "second" {
		t.Errorf("ClusterIP from the node after the drift was repaired: %q, %v; want second", got, err)
	}
}

// kernelDriftRepaired: the real kernel, as the proxier applied it, holds no
// difference (every listing reads back what was written: flags, set entries,
// iptables-save's rules); edited behind the proxier's back, as ipvsadm, ipset
// and iptables would (a virtual server deleted through its own netlink handle, a
// set entry deleted, kube-ipvs0's address removed, KUBE-SERVICES flushed), it
// holds each difference, and a full sync repairs them all.
func kernelDriftRepaired(t *testing.T, p *Proxier, node, backend string) {
	t.Helper()
	verify := func() []string {
		t.Helper()
		r, err := p.Verify(context.Background())
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		var out []string
		for _, d := range r.Differences {
			out = append(out, string(d.Change)+" "+d.Kind+" "+d.Name)
		}
		return out
	}
	if d := verify(); len(d) > 0 {
		t.Fatalf("differences in the kernel as applied: %q", d)
	}
	other := ipvs.New("/run/netns/" + node)
	t.Cleanup(func() { _ = other.Close() })
	if err := other.DeleteVirtualServer(ipvs.Key{Address: netip.MustParseAddr("172.30.0.10"), Protocol: v1.ProtocolTCP, Port: 80}); err != nil {
		t.Fatal(err)
	}
	if _, err := ask(t, node, "172.30.0.10:80"); err == nil {
		t.Error("the ClusterIP answered with its virtual server deleted")
	}
	mustRun(t, node, "ipset", "del", "KUBE-CLUSTER-IP", "172.30.0.10,tcp:80")
	mustRun(t, node, "ip", "addr", "del", "172.30.0.10/32", "dev", dummy.LinkName)
	mustRun(t, node, rendertest.IptablesBinary(backend, v1.IPv4Protocol, ""), "-w", "5", "-t", "nat", "-F", "KUBE-SERVICES")
	want := []string{
		"changed element KUBE-CLUSTER-IP",
		"missing address kube-ipvs0",
		"missing virtual server TCP 172.30.0.10:80",
		"changed rule nat KUBE-SERVICES",
	}
	if d := verify(); !slices.Equal(d, want) {
		t.Errorf("differences after the edits:\n got %q\nwant %q", d, want)
	}
	p.RequestFullSync()
	if _, err := p.Sync(context.Background()); err != nil {
		t.Fatalf("the repairing full sync: %v", err)
	}
	if d := verify(); len(d) > 0 {
		t.Errorf("differences after the repairing full sync: %q", d)
	}
}
