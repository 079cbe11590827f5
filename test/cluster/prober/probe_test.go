package prober

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// netexec is a loopback stand-in for agnhost netexec: GET /hostname over HTTP and
// "hostname" over UDP, answered with name. It records the UDP clients' addresses and
// counts the TCP connections.
type netexec struct {
	name string
	mu   sync.Mutex
	udp  []netip.AddrPort
	tcp  int
}

// listenLoopback listens on ip (127.0.0.1 or ::1) or skips the test when the family is
// missing on loopback.
func listenLoopback(t *testing.T, network, ip string) (net.Listener, net.PacketConn) {
	t.Helper()
	addr := net.JoinHostPort(ip, "0")
	if network == "tcp" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("no %s loopback: %v", ip, err)
		}
		t.Cleanup(func() { l.Close() })
		return l, nil
	}
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Skipf("no %s loopback: %v", ip, err)
	}
	t.Cleanup(func() { c.Close() })
	return nil, c
}

func (n *netexec) serveHTTP(t *testing.T, ip string, handler http.HandlerFunc) Target {
	t.Helper()
	l, _ := listenLoopback(t, "tcp", ip)
	if handler == nil {
		handler = func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/hostname" || r.Method != http.MethodGet {
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write([]byte(n.name))
		}
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.mu.Lock()
			n.tcp++
			n.mu.Unlock()
		}
	}}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return NewTarget(TCP, l.Addr().(*net.TCPAddr).AddrPort())
}

// serveUDP answers "hostname" with reply (n.name when nil) and ignores anything else.
func (n *netexec) serveUDP(t *testing.T, ip string, reply func() string) Target {
	t.Helper()
	_, c := listenLoopback(t, "udp", ip)
	if reply == nil {
		reply = func() string { return n.name }
	}
	go func() {
		buf := make([]byte, 2048)
		for {
			k, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			n.mu.Lock()
			n.udp = append(n.udp, from.(*net.UDPAddr).AddrPort())
			n.mu.Unlock()
			if strings.TrimSpace(string(buf[:k])) != "hostname" {
				continue
			}
			if r := reply(); r != "-" {
				_, _ = c.WriteTo([]byte(r), from)
			}
		}
	}()
	return NewTarget(UDP, c.LocalAddr().(*net.UDPAddr).AddrPort())
}

func TestProbeAnswers(t *testing.T) {
	for _, ip := range []string{"127.0.0.1", "::1"} {
		t.Run(ip, func(t *testing.T) {
			n := &netexec{name: "backend-1"}
			for _, target := range []Target{n.serveHTTP(t, ip, nil), n.serveUDP(t, ip, nil)} {
				for range 3 {
					got, err := Probe(context.Background(), nil, target, time.Second)
					if err != nil || got != "backend-1" {
						t.Fatalf("Probe(%s) = %q, %v; want backend-1", target, got, err)
					}
				}
			}
			n.mu.Lock()
			defer n.mu.Unlock()
			if n.tcp != 3 {
				t.Errorf("3 TCP probes opened %d connections, want one each", n.tcp)
			}
			if len(n.udp) != 3 || (n.udp[0] == n.udp[1] && n.udp[1] == n.udp[2]) {
				t.Errorf("3 UDP probes came from %v, want new sockets (source ports)", n.udp)
			}
		})
	}
}

func TestProbeFailures(t *testing.T) {
	n := &netexec{name: "backend-1"}
	closed := func(network string) Target {
		// A port nothing listens on: bind, note the port, close.
		if network == "tcp" {
			l, _ := listenLoopback(t, "tcp", "127.0.0.1")
			l.Close()
			return NewTarget(TCP, l.Addr().(*net.TCPAddr).AddrPort())
		}
		_, c := listenLoopback(t, "udp", "127.0.0.1")
		c.Close()
		return NewTarget(UDP, c.LocalAddr().(*net.UDPAddr).AddrPort())
	}
	for _, tc := range []struct {
		name   string
		target Target
		want   string
	}{
		{"TCP refused", closed("tcp"), "connection refused"},
		{"UDP port unreachable", closed("udp"), "connection refused"},
		{"HTTP 503", n.serveHTTP(t, "127.0.0.1", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
		}), "HTTP status 503"},
		{"empty body", n.serveHTTP(t, "127.0.0.1", func(http.ResponseWriter, *http.Request) {}), "empty body"},
		{"empty UDP reply", n.serveUDP(t, "127.0.0.1", func() string { return " \n" }), "empty reply"},
		{"UDP no reply", n.serveUDP(t, "127.0.0.1", func() string { return "-" }), "i/o timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			got, err := Probe(context.Background(), nil, tc.target, 200*time.Millisecond)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Probe(%s) = %q, %v; want an error containing %q", tc.target, got, err, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Probe took %v with a 200ms timeout", d)
			}
		})
	}
}

func TestProbeDialsTheTargetsFamily(t *testing.T) {
	var networks []string
	dial := func(_ context.Context, network, addr string) (net.Conn, error) {
		networks = append(networks, network+" "+addr)
		return nil, errors.New("no network here")
	}
	for _, s := range []string{"tcp://10.96.0.5:80", "udp://[fd00:10:96::5]:80"} {
		target, err := ParseTarget(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Probe(context.Background(), dial, target, time.Second); err == nil || !strings.Contains(err.Error(), "no network here") {
			t.Errorf("Probe(%s) error = %v, want the dialer's", s, err)
		}
	}
	if want := []string{"tcp4 10.96.0.5:80", "udp6 [fd00:10:96::5]:80"}; strings.Join(networks, ",") != strings.Join(want, ",") {
		t.Errorf("dialed %v, want %v", networks, want)
	}
}

func TestProbeCancelled(t *testing.T) {
	n := &netexec{name: "backend-1"}
	target := n.serveUDP(t, "127.0.0.1", func() string { return "-" })
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := Probe(ctx, nil, target, 10*time.Second)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Probe after cancel: %v, want context.Canceled in the chain", err)
	}
}
