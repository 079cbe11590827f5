package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"runtime"
	"strings"
	"sync"

	"github.com/vishvananda/netns"
)

// NS is a lab network namespace. Its methods create sockets and run commands inside it
// without any route or configuration in the root namespace.
type NS struct {
	Name string

	mu     sync.Mutex
	handle netns.NsHandle // opened lazily; closed by the lab at teardown
}

func newNS(name string) *NS { return &NS{Name: name, handle: netns.None()} }

// NewNS names an existing network namespace (one made with `ip netns add`) for the
// methods of NS; it opens nothing until first used. Close releases its handle.
func NewNS(name string) *NS { return newNS(name) }

// Close releases the namespace handle the methods opened (the namespace itself stays).
func (n *NS) Close() { n.closeHandle() }

func (n *NS) String() string { return n.Name }

// Path is the namespace's file, where `ip netns` and netns.GetFromName keep it (under
// /run: the test VM has no /var/run link), for the libraries that enter a namespace by
// path (internal/ipvs).
func (n *NS) Path() string { return "/run/netns/" + n.Name }

func (n *NS) nsHandle() (netns.NsHandle, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.handle.IsOpen() {
		return n.handle, nil
	}
	h, err := netns.GetFromName(n.Name)
	if err != nil {
		return netns.None(), fmt.Errorf("open netns %s: %w", n.Name, err)
	}
	n.handle = h
	return h, nil
}

func (n *NS) closeHandle() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.handle.IsOpen() {
		_ = n.handle.Close()
	}
	n.handle = netns.None()
}

// Do runs fn on an OS thread switched into the namespace. Sockets created by fn stay
// in the namespace for their whole life. fn runs on its own goroutine so that, should
// switching back fail, the runtime discards the tainted thread when it exits.
func (n *NS) Do(fn func() error) error {
	target, err := n.nsHandle()
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("get current netns: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter netns %s: %w", n.Name, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			// Leave the thread locked: it dies with this goroutine.
			errc <- errors.Join(ferr, fmt.Errorf("leave netns %s: %w", n.Name, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Dial connects from inside the namespace. addr must be an IP literal (no DNS).
func (n *NS) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return n.DialWith(ctx, &net.Dialer{}, network, addr)
}

// DialWith is Dial with a caller-supplied dialer (local address, timeouts).
func (n *NS) DialWith(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func() error {
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// DialInNamespace returns a dial function (for http.Transport, rest.Config.Dial, ...)
// whose connections originate inside ns.
func DialInNamespace(ns *NS) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return ns.Dial
}

// Listen opens a stream listener inside the namespace.
func (n *NS) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := n.Do(func() error {
		var err error
		l, err = (&net.ListenConfig{}).Listen(ctx, network, addr)
		return err
	})
	return l, err
}

// ListenPacket opens a packet socket inside the namespace.
func (n *NS) ListenPacket(ctx context.Context, network, addr string) (net.PacketConn, error) {
	var c net.PacketConn
	err := n.Do(func() error {
		var err error
		c, err = (&net.ListenConfig{}).ListenPacket(ctx, network, addr)
		return err
	})
	return c, err
}

// Command returns a command that runs name inside the namespace (via `ip netns exec`).
func (n *NS) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Run runs a command inside the namespace and returns its combined output; the error
// carries the output.
func (n *NS) Run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := n.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("netns %s: %s %s: %w: %s", n.Name, name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// IP runs `ip -n <ns> args...`.
func (n *NS) IP(ctx context.Context, args ...string) (string, error) {
	return runCmd(ctx, nil, "ip", append([]string{"-n", n.Name}, args...)...)
}

// IPBatch runs several `ip` commands (one per line, without the leading "ip") inside
// the namespace in one process.
func (n *NS) IPBatch(ctx context.Context, lines []string) error {
	if len(lines) == 0 {
		return nil
	}
	_, err := runCmd(ctx, strings.NewReader(strings.Join(lines, "\n")+"\n"), "ip", "-n", n.Name, "-batch", "-")
	return err
}

func runCmd(ctx context.Context, stdin *strings.Reader, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
