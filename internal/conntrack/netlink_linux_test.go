package conntrack

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/testing/roottest"
)

// conntrackRuleset makes the namespace's netfilter track connections: conntrack
// hooks are only registered in a namespace once a rule there refers to them.
const conntrackRuleset = `
table inet kproxy_conntrack_test {
	chain output {
		type filter hook output priority 0; policy accept;
		ct state new counter
	}
}
`

// testNamespace creates a named network namespace with loopback up and conntrack
// active (inside the namespace only), and deletes it when the test ends, whatever
// the outcome. It returns the namespace's handle.
func testNamespace(t *testing.T) netns.NsHandle {
	t.Helper()
	roottest.Require(t, "creates a network namespace and reads its conntrack table", "ip", "nft")
	name := fmt.Sprintf("kproxy-ct-test-%d", os.Getpid())
	run := func(stdin string, args ...string) {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdin = strings.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	run("", "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("deleting namespace %s: %v\n%s", name, err, out)
		}
	})
	run("", "ip", "netns", "exec", name, "ip", "link", "set", "lo", "up")
	run(conntrackRuleset, "ip", "netns", "exec", name, "nft", "-f", "-")

	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatalf("opening namespace %s: %v", name, err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	return ns
}

// sendUDPInNamespace sends one datagram over the namespace's loopback from a
// socket created inside it, and returns the local and remote ports.
func sendUDPInNamespace(t *testing.T, ns netns.NsHandle) (src, dst int) {
	t.Helper()
	// Sockets belong to the namespace of the thread that creates them; switch
	// one locked thread, create them, switch back.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatalf("getting current namespace: %v", err)
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		t.Fatalf("entering namespace: %v", err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			// The thread stays locked and is discarded when the goroutine exits.
			t.Errorf("restoring namespace: %v", err)
		}
	}()

	server, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer server.Close()
	client, err := net.DialUDP("udp4", nil, server.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer client.Close()
	if _, err := client.Write([]byte("kproxy")); err != nil {
		t.Fatalf("send: %v", err)
	}
	return client.LocalAddr().(*net.UDPAddr).Port, server.LocalAddr().(*net.UDPAddr).Port
}

func findFlow(flows []*netlink.ConntrackFlow, src, dst int) *netlink.ConntrackFlow {
	for _, f := range flows {
		if f.Forward.Protocol == unix.IPPROTO_UDP && int(f.Forward.SrcPort) == src && int(f.Forward.DstPort) == dst {
			return f
		}
	}
	return nil
}

func TestNetlinkListAndDeleteInNamespace(t *testing.T) {
	ns := testNamespace(t)
	handle, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatalf("netlink handle in namespace: %v", err)
	}
	defer handle.Close()
	ct := &conntracker{handler: handle}

	src, dst := sendUDPInNamespace(t, ns)

	entries, err := ct.ListEntries(v1.IPv4Protocol)
	if err != nil {
		t.Fatalf("ListEntries: %v", err)
	}
	flow := findFlow(entries, src, dst)
	if flow == nil {
		t.Fatalf("no conntrack entry for udp 127.0.0.1:%d -> 127.0.0.1:%d among %d entries", src, dst, len(entries))
	}
	if !flow.Forward.DstIP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("unexpected destination %s", flow.Forward.DstIP)
	}

	// The reconciler sees the flow as sent to a "service" at 127.0.0.1:dst whose
	// only serving endpoint is elsewhere, so it deletes it.
	svc := Service{Protocol: v1.ProtocolUDP, Port: int32(dst), ServingEndpoints: eps("127.0.0.2:9")}
	svc.ClusterIP = mustAddr(t, "127.0.0.1")
	n, err := CleanStaleEntries(t.Context(), ct, v1.IPv4Protocol, []Service{svc})
	if err != nil || n != 1 {
		t.Fatalf("CleanStaleEntries = %d, %v; want 1, nil", n, err)
	}
	entries, err = ct.ListEntries(v1.IPv4Protocol)
	if err != nil {
		t.Fatalf("ListEntries: %v", err)
	}
	if findFlow(entries, src, dst) != nil {
		t.Fatalf("flow still present after delete")
	}
}
