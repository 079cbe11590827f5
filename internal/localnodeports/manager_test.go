package localnodeports

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeNet is an in-memory network: listeners by address, and backends (servers
// dialled by the proxy) by address. Connections are net.Pipe pairs.
type fakeNet struct {
	mu        sync.Mutex
	listeners map[string]*fakeListener
	backends  map[string]func(net.Conn)
	// busy addresses fail to bind, as a port in use.
	busy    map[string]bool
	listens []string
	dials   []string
}

func newFakeNet() *fakeNet {
	return &fakeNet{listeners: map[string]*fakeListener{}, backends: map[string]func(net.Conn){}, busy: map[string]bool{}}
}

func (n *fakeNet) Listen(_ context.Context, network, addr string) (net.Listener, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.listens = append(n.listens, network+" "+addr)
	if n.busy[addr] || n.listeners[addr] != nil {
		return nil, &net.OpError{Op: "listen", Net: network, Err: syscall.EADDRINUSE}
	}
	l := &fakeListener{n: n, addr: addr, conns: make(chan net.Conn), closed: make(chan struct{})}
	n.listeners[addr] = l
	return l, nil
}

func (n *fakeNet) Dial(ctx context.Context, _, addr string) (net.Conn, error) {
	n.mu.Lock()
	serve := n.backends[addr]
	n.dials = append(n.dials, addr)
	n.mu.Unlock()
	if serve == nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	c, s := net.Pipe()
	go serve(s)
	return c, nil
}

// connect opens a client connection to the listener on addr.
func (n *fakeNet) connect(t *testing.T, addr string) net.Conn {
	t.Helper()
	n.mu.Lock()
	l := n.listeners[addr]
	n.mu.Unlock()
	if l == nil {
		t.Fatalf("nothing listens on %s", addr)
	}
	c, s := net.Pipe()
	select {
	case l.conns <- s:
	case <-l.closed:
		t.Fatalf("%s closed", addr)
	case <-time.After(5 * time.Second):
		t.Fatalf("%s does not accept", addr)
	}
	return c
}

func (n *fakeNet) listening(addr string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.listeners[addr] != nil
}

type fakeListener struct {
	n      *fakeNet
	addr   string
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *fakeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *fakeListener) Close() error {
	l.once.Do(func() {
		close(l.closed)
		l.n.mu.Lock()
		delete(l.n.listeners, l.addr)
		l.n.mu.Unlock()
	})
	return nil
}

func (l *fakeListener) Addr() net.Addr { return &net.TCPAddr{} }

// namedBackend answers every line with "<id> <line>" until the client closes.
func namedBackend(id string) func(net.Conn) {
	return func(c net.Conn) {
		defer c.Close()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if _, err := fmt.Fprintf(c, "%s %s", id, line); err != nil {
				return
			}
		}
	}
}

// ask sends one line on a new connection to addr and returns the reply line.
func ask(t *testing.T, n *fakeNet, addr, line string) string {
	t.Helper()
	c := n.connect(t, addr)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatalf("write to %s: %v", addr, err)
	}
	reply, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("read from %s: %v", addr, err)
	}
	return strings.TrimSuffix(reply, "\n")
}

// fakeMetrics records what a Manager reports.
type fakeMetrics struct {
	mu        sync.Mutex
	listeners []int
	failures  int
}

func (m *fakeMetrics) SetLocalhostNodePortListeners(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.listeners = append(m.listeners, n)
}

func (m *fakeMetrics) IncLocalhostNodePortListenerFailures() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failures++
}

func (m *fakeMetrics) last() (int, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.listeners) == 0 {
		return -1, m.failures
	}
	return m.listeners[len(m.listeners)-1], m.failures
}

type harness struct {
	m       *Manager
	net     *fakeNet
	metrics *fakeMetrics
	clock   *clocktesting.FakeClock
	picks   chan int // IntN's answers, when set
	cancel  context.CancelFunc
	done    chan error
}

func newHarness(t *testing.T, family v1.IPFamily) *harness {
	h := &harness{net: newFakeNet(), metrics: &fakeMetrics{}, clock: clocktesting.NewFakeClock(time.Unix(1000, 0)), done: make(chan error, 1)}
	h.m = New(Config{Family: family, Metrics: h.metrics, Listen: h.net.Listen, Dial: h.net.Dial, Clock: h.clock,
		IntN: func(n int) int {
			if h.picks == nil {
				return 0
			}
			return <-h.picks % n
		}})
	return h
}

// start runs the manager until the test ends; the test fails if Run does not
// return nil promptly once stopped.
func (h *harness) start(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, h.cancel = context.WithCancel(ctx)
	go func() { h.done <- h.m.Run(ctx) }()
	t.Cleanup(func() { h.stop(t) })
	// Run applies what Sync handed before it; wait until it is running.
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.m.mu.Lock()
		st := h.m.state
		h.m.mu.Unlock()
		if st != notStarted {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("Run did not start")
		}
		time.Sleep(time.Millisecond)
	}
}

func (h *harness) stop(t *testing.T) {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			t.Errorf("Run returned %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("Run did not return after its context was canceled")
	}
}

func spec(svc string, port uint16, eps ...string) Spec {
	return Spec{Name: name(svc), NodePort: port, Endpoints: addrPorts(eps...)}
}

func TestManagerServesAndReconciles(t *testing.T) {
	h := newHarness(t, v1.IPv4Protocol)
	h.net.backends["10.0.0.1:8080"] = namedBackend("one")
	h.net.backends["10.0.0.2:8080"] = namedBackend("two")

	// Handed before Run: applied when Run starts.
	h.m.Sync([]Spec{spec("a", 30001, "10.0.0.1:8080"), spec("b", 30002, "10.0.0.2:8080")})
	if h.net.listening("127.0.0.1:30001") {
		t.Fatal("bound before Run")
	}
	h.start(t)
	if got := h.m.Ports(); !slices.Equal(got, []uint16{30001, 30002}) {
		t.Fatalf("ports %v", got)
	}
	if got := ask(t, h.net, "127.0.0.1:30001", "hi"); got != "one hi" {
		t.Errorf("30001 answered %q", got)
	}
	if got := ask(t, h.net, "127.0.0.1:30002", "hi"); got != "two hi" {
		t.Errorf("30002 answered %q", got)
	}
	if n, f := h.metrics.last(); n != 2 || f != 0 {
		t.Errorf("metrics: listeners %d failures %d, want 2 and 0", n, f)
	}
	if got := h.net.listens; !slices.Equal(got, []string{"tcp4 127.0.0.1:30001", "tcp4 127.0.0.1:30002"}) {
		t.Errorf("listens %v", got)
	}

	// b is gone, a moves to the other endpoint: the same listener, new endpoints.
	h.m.Sync([]Spec{spec("a", 30001, "10.0.0.2:8080")})
	if h.net.listening("127.0.0.1:30002") {
		t.Error("30002 still listens after its Service went away")
	}
	if got := ask(t, h.net, "127.0.0.1:30001", "again"); got != "two again" {
		t.Errorf("30001 answered %q after the endpoint change", got)
	}
	if len(h.net.listens) != 2 {
		t.Errorf("the endpoint change re-bound: %v", h.net.listens)
	}
	if n, _ := h.metrics.last(); n != 1 {
		t.Errorf("listeners gauge %d, want 1", n)
	}

	// Specs without endpoints have no listener.
	h.m.Sync([]Spec{{Name: name("a"), NodePort: 30001}})
	if h.net.listening("127.0.0.1:30001") {
		t.Error("a listener without endpoints")
	}

	h.stop(t)
	if n, _ := h.metrics.last(); n != 0 {
		t.Errorf("listeners gauge %d after Run returned, want 0", n)
	}
	// After Run, Sync binds nothing.
	h.m.Sync([]Spec{spec("a", 30001, "10.0.0.1:8080")})
	if h.net.listening("127.0.0.1:30001") {
		t.Error("Sync after Run bound a listener")
	}
}

func TestManagerIPv6(t *testing.T) {
	h := newHarness(t, v1.IPv6Protocol)
	h.net.backends["[fd00::1]:8080"] = namedBackend("v6")
	h.start(t)
	h.m.Sync([]Spec{spec("a", 30001, "[fd00::1]:8080")})
	if got := ask(t, h.net, "[::1]:30001", "hi"); got != "v6 hi" {
		t.Errorf("answered %q", got)
	}
	if got := h.net.listens; !slices.Equal(got, []string{"tcp6 [::1]:30001"}) {
		t.Errorf("listens %v", got)
	}
}

// TestManagerBindFailure: a port in use is logged and counted, and tried again at
// every Sync until it binds.
func TestManagerBindFailure(t *testing.T) {
	h := newHarness(t, v1.IPv4Protocol)
	h.net.backends["10.0.0.1:8080"] = namedBackend("one")
	h.net.busy["127.0.0.1:30001"] = true
	h.start(t)
	specs := []Spec{spec("a", 30001, "10.0.0.1:8080"), spec("b", 30002, "10.0.0.1:8080")}
	h.m.Sync(specs)
	h.m.Sync(specs)
	if n, f := h.metrics.last(); n != 1 || f != 2 {
		t.Errorf("listeners %d failures %d, want 1 and 2 (one per Sync)", n, f)
	}
	h.net.mu.Lock()
	delete(h.net.busy, "127.0.0.1:30001")
	h.net.mu.Unlock()
	h.m.Sync(specs)
	if got := h.m.Ports(); !slices.Equal(got, []uint16{30001, 30002}) {
		t.Errorf("ports %v after the port was freed", got)
	}
	if got := ask(t, h.net, "127.0.0.1:30001", "x"); got != "one x" {
		t.Errorf("answered %q", got)
	}
}

func TestManagerDuplicateNodePort(t *testing.T) {
	h := newHarness(t, v1.IPv4Protocol)
	h.net.backends["10.0.0.1:8080"] = namedBackend("first")
	h.net.backends["10.0.0.2:8080"] = namedBackend("second")
	h.start(t)
	h.m.Sync([]Spec{spec("a", 30001, "10.0.0.1:8080"), spec("b", 30001, "10.0.0.2:8080")})
	if got := ask(t, h.net, "127.0.0.1:30001", "x"); got != "first x" {
		t.Errorf("answered %q, want the first Service's", got)
	}
	if _, f := h.metrics.last(); f != 0 {
		t.Errorf("%d failures", f)
	}
}

// TestManagerRemovalClosesConnections: removing a listener (or stopping Run) ends
// its in-flight connections, as upstream.
func TestManagerRemovalClosesConnections(t *testing.T) {
	for _, how := range []string{"removed", "stopped"} {
		t.Run(how, func(t *testing.T) {
			h := newHarness(t, v1.IPv4Protocol)
			h.net.backends["10.0.0.1:8080"] = namedBackend("one")
			h.start(t)
			h.m.Sync([]Spec{spec("a", 30001, "10.0.0.1:8080")})
			c := h.net.connect(t, "127.0.0.1:30001")
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			r := bufio.NewReader(c)
			if _, err := io.WriteString(c, "x\n"); err != nil {
				t.Fatal(err)
			}
			if _, err := r.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
			if how == "removed" {
				h.m.Sync(nil)
			} else {
				h.stop(t)
			}
			_, err := r.ReadString('\n')
			var ne net.Error
			if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
				t.Fatalf("the connection survived (read: %v)", err)
			}
		})
	}
}

// TestManagerBackendDown: the client's connection is closed when the endpoint
// refuses, as upstream.
func TestManagerBackendDown(t *testing.T) {
	h := newHarness(t, v1.IPv4Protocol)
	h.start(t)
	h.m.Sync([]Spec{spec("a", 30001, "10.0.0.9:8080")})
	c := h.net.connect(t, "127.0.0.1:30001")
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	buf, err := io.ReadAll(c)
	if err != nil || len(buf) != 0 {
		t.Errorf("read %q, %v; want EOF at once", buf, err)
	}
}

// TestManagerSpreadsAndPins: without affinity each connection takes the endpoint
// IntN picks; with ClientIP affinity all take the pinned one until it has been idle
// longer than the timeout or leaves the endpoints; a changed timeout drops the pin.
func TestManagerSpreadsAndPins(t *testing.T) {
	h := newHarness(t, v1.IPv4Protocol)
	h.picks = make(chan int, 100)
	for i, id := range []string{"e0", "e1", "e2"} {
		h.net.backends[fmt.Sprintf("10.0.0.%d:80", i)] = namedBackend(id)
	}
	h.start(t)
	eps := []string{"10.0.0.0:80", "10.0.0.1:80", "10.0.0.2:80"}
	const addr = "127.0.0.1:30001"
	// askWith answers IntN with pick (-1: IntN must not be asked: the pinned
	// endpoint is used).
	askWith := func(pick int) string {
		if pick >= 0 {
			h.picks <- pick
		}
		reply := ask(t, h.net, addr, "x")
		if len(h.picks) != 0 {
			t.Fatalf("IntN was not asked for pick %d", <-h.picks)
		}
		return strings.Fields(reply)[0]
	}

	h.m.Sync([]Spec{spec("a", 30001, eps...)})
	for _, pick := range []int{0, 2, 1, 2} {
		if got, want := askWith(pick), fmt.Sprintf("e%d", pick); got != want {
			t.Errorf("no affinity, pick %d: %s, want %s", pick, got, want)
		}
	}

	sticky := spec("a", 30001, eps...)
	sticky.AffinityTimeout = 10 * time.Second
	h.m.Sync([]Spec{sticky})
	if got := askWith(2); got != "e2" {
		t.Fatalf("first affine pick: %s", got)
	}
	for range 3 {
		h.clock.Step(9 * time.Second) // within the window, renewed each time
		if got := askWith(-1); got != "e2" {
			t.Errorf("within the window: %s, want the pinned e2", got)
		}
	}
	h.clock.Step(11 * time.Second)
	if got := askWith(1); got != "e1" {
		t.Errorf("after the window: %s, want a new pick e1", got)
	}
	// The pinned endpoint leaves: a new pick.
	sticky.Endpoints = addrPorts("10.0.0.0:80", "10.0.0.2:80")
	h.m.Sync([]Spec{sticky})
	if got := askWith(1); got != "e2" {
		t.Errorf("pinned endpoint gone: %s, want e2 (pick 1 of the two left)", got)
	}
	// A new timeout drops the pin.
	sticky.AffinityTimeout = 20 * time.Second
	h.m.Sync([]Spec{sticky})
	if got := askWith(0); got != "e0" {
		t.Errorf("after a timeout change: %s, want a new pick e0", got)
	}
}

func TestManagerRunTwice(t *testing.T) {
	h := newHarness(t, v1.IPv4Protocol)
	h.start(t)
	if err := h.m.Run(context.Background()); err == nil {
		t.Error("a second Run succeeded")
	}
}
