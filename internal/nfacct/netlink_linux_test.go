package nfacct

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/kproxy/kproxy/internal/testing/roottest"
)

// testNamespace creates a network namespace with loopback up, deleted when the test
// ends whatever the outcome, and returns its handle.
func testNamespace(t *testing.T) (string, netns.NsHandle) {
	t.Helper()
	roottest.Require(t, "creates a network namespace and nfacct counters in it", "ip")
	name := fmt.Sprintf("kpl-%d-nfacct", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("deleting namespace %s: %v\n%s", name, err, out)
		}
	})
	if out, err := exec.Command("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v\n%s", err, out)
	}
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatalf("opening namespace %s: %v", name, err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	return name, ns
}

// iptablesCommand returns an iptables binary that can load -m nfacct rules, or
// skips the test.
func iptablesCommand(t *testing.T) string {
	t.Helper()
	for _, bin := range []string{"iptables-nft", "iptables"} {
		if _, err := exec.LookPath(bin); err == nil {
			return bin
		}
	}
	t.Skip("needs iptables to count packets with -m nfacct")
	return ""
}

// The kernel client creates a counter once, reads it, and sees packets that an
// iptables rule counts into it; a missing counter is ErrNotFound. All in a private
// namespace.
func TestNetlinkCounters(t *testing.T) {
	nsName, ns := testNamespace(t)
	c := NewAt(ns)
	const name = "kproxy_test_pkts"

	if _, err := c.Get(name); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get before Ensure: %v, want ErrNotFound", err)
	}
	for range 2 {
		if err := c.Ensure(name); err != nil {
			t.Fatalf("Ensure: %v", err)
		}
	}
	got, err := c.Get(name)
	if err != nil || got != (Counter{Name: name}) {
		t.Fatalf("Get after Ensure = %+v, %v; want a zero counter", got, err)
	}
	// The counter belongs to the namespace: the caller's namespace does not see it.
	if _, err := New().Get(name); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get in the test's own namespace: %v, want ErrNotFound", err)
	}

	ipt := iptablesCommand(t)
	rule := []string{"netns", "exec", nsName, ipt, "-w", "5", "-A", "OUTPUT", "-o", "lo", "-p", "udp", "--dport", "9", "-m", "nfacct", "--nfacct-name", name}
	if out, err := exec.Command("ip", rule...).CombinedOutput(); err != nil {
		t.Skipf("%s cannot load an nfacct rule here: %v\n%s", ipt, err, out)
	}
	sendUDP(t, ns, 3)
	got, err = c.Get(name)
	if err != nil || got.Packets != 3 || got.Bytes == 0 {
		t.Errorf("Get after 3 datagrams = %+v, %v; want 3 packets", got, err)
	}
	if err := c.Ensure(name); err != nil {
		t.Fatalf("Ensure of an existing counter: %v", err)
	}
	if again, _ := c.Get(name); again.Packets != 3 {
		t.Errorf("Ensure reset the counter: %+v", again)
	}
	if err := c.Ensure(""); err == nil {
		t.Errorf("Ensure accepted an empty name")
	}
}

// sendUDP sends n datagrams to 127.0.0.1:9 from inside ns.
func sendUDP(t *testing.T, ns netns.NsHandle, n int) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread is left in ns and dies with the goroutine (not unlocked).
		if err := netns.Set(ns); err != nil {
			errc <- err
			return
		}
		// Unconnected: the ICMP port unreachable that answers each datagram is
		// not reported to the next write.
		conn, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			errc <- err
			return
		}
		defer conn.Close()
		dst := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}
		for range n {
			if _, err := conn.WriteTo([]byte("x"), dst); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatalf("sending UDP in the namespace: %v", err)
	}
}

func TestFake(t *testing.T) {
	f := NewFake()
	if _, err := f.Get("a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of a missing counter: %v", err)
	}
	if err := f.Ensure("a"); err != nil {
		t.Fatal(err)
	}
	if err := f.Count("a", 2, 100); err != nil {
		t.Fatal(err)
	}
	if err := f.Ensure("a"); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Get("a"); err != nil || got != (Counter{Name: "a", Packets: 2, Bytes: 100}) {
		t.Errorf("Get = %+v, %v", got, err)
	}
	if err := f.Ensure("a-name-longer-than-thirty-one-bytes"); err == nil {
		t.Errorf("Ensure accepted a name over %d bytes", MaxNameLength)
	}
}
