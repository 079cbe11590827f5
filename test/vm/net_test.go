package vm_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/kproxy/kproxy/test/vm"
)

// The addresses of the tap test (a documentation range).
var (
	tapGuest = netip.MustParsePrefix("192.0.2.2/24")
	tapHost  = netip.MustParsePrefix("192.0.2.1/24")
)

const tapPort = 7777

// TestTapNetwork: a VM with Config.Net listens on TCP on its address; a socket made in
// the test's namespace connects to it through the tap and reads its greeting.
func TestTapNetwork(t *testing.T) {
	if vm.InVM() {
		tapGuestPart(t)
		return
	}
	cfg := vmConfig(t)
	ns := testNamespace(t)
	cfg.Net = &vm.Network{Netns: ns, Guest: tapGuest, Host: tapHost}
	listening := newLineWatch("listening")
	cfg.Stdout = listening
	var stderr syncBuffer
	cfg.Stderr = &stderr

	type outcome struct {
		res vm.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := cfg.Run(context.Background(), selfPayload(t))
		done <- outcome{res, err}
	}()
	select {
	case <-listening.seen:
	case o := <-done:
		t.Fatalf("the VM ended before listening: %+v %v\nstdout:\n%s\nstderr:\n%s", o.res, o.err, listening.String(), stderr.String())
	case <-time.After(5 * time.Minute):
		t.Fatalf("the guest was not listening after 5 minutes\nstdout:\n%s", listening.String())
	}
	greeting, err := dialIn(ns, netip.AddrPortFrom(tapGuest.Addr(), tapPort).String())
	if err != nil {
		t.Errorf("connecting from namespace %s: %v", ns, err)
	} else if !strings.HasPrefix(greeting, "hello from 6.1.") {
		t.Errorf("greeting %q, want one from the 6.1 VM", greeting)
	}
	select {
	case o := <-done:
		if o.err != nil || o.res.ExitCode != 0 {
			t.Errorf("the VM's run: %+v %v\nstdout:\n%s\nstderr:\n%s", o.res, o.err, listening.String(), stderr.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("the VM did not stop within 3 minutes of the connection")
	}
}

// tapGuestPart listens on the guest's address, greets one connection and returns.
func tapGuestPart(t *testing.T) {
	ln, err := net.Listen("tcp", netip.AddrPortFrom(tapGuest.Addr(), tapPort).String())
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer ln.Close()
	fmt.Println("listening on", ln.Addr())
	// Bounded: the host connects right after reading the line above.
	if err := ln.(*net.TCPListener).SetDeadline(time.Now().Add(3 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept()
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	defer c.Close()
	release, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "hello from %s", strings.TrimSpace(string(release)))
	t.Logf("greeted %v", c.RemoteAddr())
}

// testNamespace creates the namespace kpl-<pid>-vm (the kernel tests' naming: a lab
// removes leftovers whose owner is gone), deleted at the end of the test.
func testNamespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("kpl-%d-vm", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up in %s: %v: %s", name, err, out)
	}
	return name
}

// dialIn connects to addr from a socket created in the namespace ns and returns what
// the peer sends before closing. The thread that entered ns is never unlocked, so Go
// discards it rather than reuse it in the wrong namespace.
func dialIn(ns, addr string) (string, error) {
	type result struct {
		got string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		h, err := netns.GetFromName(ns)
		if err != nil {
			ch <- result{err: fmt.Errorf("opening %s: %w", ns, err)}
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			ch <- result{err: fmt.Errorf("entering %s: %w", ns, err)}
			return
		}
		c, err := net.DialTimeout("tcp", addr, 30*time.Second)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		b, err := io.ReadAll(c)
		ch <- result{string(b), err}
	}()
	r := <-ch
	return r.got, r.err
}

// lineWatch is a syncBuffer that closes seen when a written line holds a substring.
type lineWatch struct {
	syncBuffer
	sub  string
	seen chan struct{}
	once bool
}

func newLineWatch(sub string) *lineWatch {
	return &lineWatch{sub: sub, seen: make(chan struct{})}
}

func (l *lineWatch) Write(p []byte) (int, error) {
	n, err := l.syncBuffer.Write(p)
	if !l.once && strings.Contains(l.String(), l.sub) {
		l.once = true
		close(l.seen)
	}
	return n, err
}
