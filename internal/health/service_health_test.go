package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
)

// loopbackListener records each requested address and serves it on a real
// 127.0.0.1:0 socket, so tests never bind the requested (node) ports.
type loopbackListener struct {
	mu     sync.Mutex
	opened map[string]*trackedListener // requested address -> listener
	fail   map[string]error            // requested address -> error to return
	calls  []string                    // network + " " + address, in order
}

type trackedListener struct {
	net.Listener
	mu     sync.Mutex
	closed bool
}

func (l *trackedListener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	return l.Listener.Close()
}

func (l *trackedListener) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

func newLoopbackListener() *loopbackListener {
	return &loopbackListener{opened: map[string]*trackedListener{}, fail: map[string]error{}}
}

func (f *loopbackListener) Listen(ctx context.Context, network, address string) (net.Listener, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, network+" "+address)
	if err := f.fail[address]; err != nil {
		return nil, err
	}
	ln, err := NetListener{}.Listen(ctx, "tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	tl := &trackedListener{Listener: ln}
	f.opened[address] = tl
	return tl, nil
}

func (f *loopbackListener) get(address string) *trackedListener {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opened[address]
}

type fixedHealth struct {
	mu      sync.Mutex
	healthy bool
}

func (h *fixedHealth) set(v bool) { h.mu.Lock(); h.healthy = v; h.mu.Unlock() }
func (h *fixedHealth) Health() ProxyHealth {
	h.mu.Lock()
	defer h.mu.Unlock()
	return ProxyHealth{Healthy: h.healthy}
}

func query(t *testing.T, ln *trackedListener) (int, string, string) {
	t.Helper()
	if ln == nil {
		t.Fatal("no listener")
	}
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Load-Balancing-Endpoint-Weight"), string(body)
}

func TestServiceHealthServer(t *testing.T) {
	fl := newLoopbackListener()
	ph := &fixedHealth{healthy: true}
	s := NewServiceHealthServer(ServiceHealthConfig{NodeName: "n1", Family: v1.IPv4Protocol, ProxyHealth: ph, Listener: fl})
	defer s.Close()

	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	if err := s.SyncServices(map[types.NamespacedName]uint16{a: 30001, b: 30002}); err != nil {
		t.Fatal(err)
	}
	lnA := fl.get("0.0.0.0:30001")
	lnB := fl.get("0.0.0.0:30002")
	if lnA == nil || lnB == nil {
		t.Fatalf("listeners not opened on the wildcard address: %v", fl.calls)
	}
	if fl.calls[0][:5] != "tcp4 " {
		t.Errorf("network %q, want tcp4", fl.calls[0])
	}

	// No endpoints yet.
	code, weight, body := query(t, lnA)
	wantBody := "{\n\t\"service\": {\n\t\t\"namespace\": \"ns\",\n\t\t\"name\": \"a\"\n\t},\n\t\"localEndpoints\": 0,\n\t\"serviceProxyHealthy\": true\n}"
	if code != 503 || weight != "0" || body != wantBody {
		t.Errorf("no endpoints: %d weight %q body\n%s\nwant 503 weight 0\n%s", code, weight, body, wantBody)
	}

	_ = s.SyncEndpoints(map[types.NamespacedName]int{a: 2, b: 1, {Namespace: "ns", Name: "unknown"}: 5})
	code, weight, body = query(t, lnA)
	if code != 200 || weight != "2" || !strings.Contains(body, `"localEndpoints": 2,`) {
		t.Errorf("2 endpoints: %d %q %s", code, weight, body)
	}

	ph.set(false)
	code, weight, body = query(t, lnA)
	if code != 503 || weight != "2" || !strings.Contains(body, `"serviceProxyHealthy": false`) {
		t.Errorf("proxy unhealthy: %d %q %s", code, weight, body)
	}
	ph.set(true)

	// b missing from the endpoints map -> 0.
	_ = s.SyncEndpoints(map[types.NamespacedName]int{a: 1})
	if code, weight, _ := query(t, lnB); code != 503 || weight != "0" {
		t.Errorf("b reset: %d %q", code, weight)
	}

	// Remove b, move a to a new port: a's old and b's listeners close, a reopens.
	if err := s.SyncServices(map[types.NamespacedName]uint16{a: 30011}); err != nil {
		t.Fatal(err)
	}
	if !lnB.isClosed() || !lnA.isClosed() {
		t.Errorf("closed: a=%v b=%v, want both", lnA.isClosed(), lnB.isClosed())
	}
	lnA2 := fl.get("0.0.0.0:30011")
	if code, _, body := query(t, lnA2); code != 503 || !strings.Contains(body, `"localEndpoints": 0,`) {
		t.Errorf("reopened a keeps no count: %d %s", code, body)
	}

	// Unchanged services are left alone.
	calls := len(fl.calls)
	_ = s.SyncServices(map[types.NamespacedName]uint16{a: 30011})
	if len(fl.calls) != calls || lnA2.isClosed() {
		t.Errorf("unchanged service was reopened")
	}
	if got := s.Ports(); len(got) != 1 || got[a] != 30011 {
		t.Errorf("Ports() = %v", got)
	}

	s.Close()
	if !lnA2.isClosed() {
		t.Error("Close left a listener open")
	}
	if err := s.SyncServices(nil); err == nil {
		t.Error("SyncServices after Close succeeded")
	}
}

func TestServiceHealthAddressesAndFamily(t *testing.T) {
	tests := []struct {
		name      string
		family    v1.IPFamily
		addresses []netip.Addr
		want      []string
	}{
		{"ipv6 wildcard", v1.IPv6Protocol, nil, []string{"tcp6 [::]:30000"}},
		{"unknown family", "", nil, []string{"tcp 0.0.0.0:30000"}},
		{"node addresses", v1.IPv4Protocol, []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")},
			[]string{"tcp4 10.0.0.1:30000", "tcp4 10.0.0.2:30000"}},
		{"ipv6 node address", v1.IPv6Protocol, []netip.Addr{netip.MustParseAddr("fd00::1")}, []string{"tcp6 [fd00::1]:30000"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fl := newLoopbackListener()
			s := NewServiceHealthServer(ServiceHealthConfig{Family: tc.family, Addresses: tc.addresses, Listener: fl})
			defer s.Close()
			_ = s.SyncServices(map[types.NamespacedName]uint16{{Namespace: "ns", Name: "s"}: 30000})
			if fmt.Sprint(fl.calls) != fmt.Sprint(tc.want) {
				t.Errorf("listened on %v, want %v", fl.calls, tc.want)
			}
		})
	}
}

func TestServiceHealthOpenFailure(t *testing.T) {
	fl := newLoopbackListener()
	fl.fail["10.0.0.2:30000"] = errors.New("address in use")
	rec := events.NewFakeRecorder(10)
	s := NewServiceHealthServer(ServiceHealthConfig{
		NodeName: "n1", Recorder: rec, Family: v1.IPv4Protocol, Listener: fl,
		Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")},
	})
	defer s.Close()
	name := types.NamespacedName{Namespace: "ns", Name: "s"}
	if err := s.SyncServices(map[types.NamespacedName]uint16{name: 30000}); err != nil {
		t.Fatalf("SyncServices = %v; open failures are not errors", err)
	}
	if first := fl.get("10.0.0.1:30000"); first == nil || !first.isClosed() {
		t.Error("partial open was not rolled back")
	}
	if len(s.Ports()) != 0 {
		t.Errorf("failed service recorded as active: %v", s.Ports())
	}
	select {
	case ev := <-rec.Events:
		want := `Warning FailedToStartServiceHealthcheck node n1 failed to start healthcheck "ns/s" on port 30000: address in use`
		if ev != want {
			t.Errorf("event %q, want %q", ev, want)
		}
	default:
		t.Error("no event recorded")
	}

	// Retried on the next sync.
	delete(fl.fail, "10.0.0.2:30000")
	_ = s.SyncServices(map[types.NamespacedName]uint16{name: 30000})
	if len(s.Ports()) != 1 {
		t.Error("retry did not open the service")
	}
}
