package health

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kproxy/kproxy/internal/metrics"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newTestProxyHealth() (*ProxyHealthServer, *clocktesting.FakeClock, *metrics.Metrics) {
	fc := clocktesting.NewFakeClock(t0)
	m := metrics.New(prometheus.NewRegistry())
	hs := NewProxyHealthServer(ProxyHealthConfig{
		BindAddress:   "127.0.0.1:0",
		HealthTimeout: 60 * time.Second,
		Metrics:       m,
		Clock:         fc,
	})
	return hs, fc, m
}

func readyNode() *v1.Node { return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}} }

func probe(t *testing.T, hs *ProxyHealthServer, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	hs.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s Content-Type %q", path, ct)
	}
	return rec.Code, rec.Body.String()
}

func TestProxyHealthTransitions(t *testing.T) {
	hs, fc, m := newTestProxyHealth()
	hs.SyncNode(readyNode())

	expect := func(step string, healthz, livez int) {
		t.Helper()
		if code, body := probe(t, hs, "/healthz"); code != healthz {
			t.Errorf("%s: /healthz = %d, want %d (%s)", step, code, healthz, body)
		}
		if code, body := probe(t, hs, "/livez"); code != livez {
			t.Errorf("%s: /livez = %d, want %d (%s)", step, code, livez, body)
		}
	}

	expect("starting up", 200, 200)
	hs.QueuedUpdate(v1.IPv4Protocol)
	fc.Step(2 * time.Minute)
	expect("queued before any update is ignored", 200, 200)

	hs.Updated(v1.IPv4Protocol)
	hs.Updated(v1.IPv6Protocol)
	expect("synced", 200, 200)

	hs.QueuedUpdate(v1.IPv6Protocol)
	fc.Step(59 * time.Second)
	hs.QueuedUpdate(v1.IPv6Protocol) // does not reset the oldest pending time
	expect("pending, not late", 200, 200)
	fc.Step(time.Second)
	expect("IPv6 late", 503, 503)

	hs.Updated(v1.IPv6Protocol)
	expect("recovered", 200, 200)

	node := readyNode()
	node.Spec.Taints = []v1.Taint{{Key: ToBeDeletedTaint, Effect: v1.TaintEffectNoSchedule}}
	hs.SyncNode(node)
	expect("autoscaler taint", 503, 200)

	node = readyNode()
	node.DeletionTimestamp = &metav1.Time{Time: t0}
	hs.SyncNode(node)
	expect("node deleting", 503, 200)

	hs.SyncNode(nil)
	expect("node unknown", 503, 200)

	hs.SyncNode(readyNode())
	expect("node back", 200, 200)

	for _, c := range []struct {
		vec  *prometheus.CounterVec
		code string
		want float64
	}{
		{m.ProxyHealthzTotal, "200", 6}, {m.ProxyHealthzTotal, "503", 4},
		{m.ProxyLivezTotal, "200", 9}, {m.ProxyLivezTotal, "503", 1},
	} {
		if got := testutil.ToFloat64(c.vec.WithLabelValues(c.code)); got != c.want {
			t.Errorf("counter code=%s = %v, want %v", c.code, got, c.want)
		}
	}
}

func TestProxyHealthJSON(t *testing.T) {
	hs, fc, _ := newTestProxyHealth()
	hs.SyncNode(readyNode())
	hs.Updated(v1.IPv4Protocol)
	fc.Step(10 * time.Second)

	_, body := probe(t, hs, "/healthz")
	want := `{"lastUpdated":"2026-01-02T03:04:15Z","currentTime":"2026-01-02T03:04:15Z","nodeEligible":true,"healthy":true,"status":{"IPv4":{"lastUpdated":"2026-01-02T03:04:05Z","healthy":true}}}`
	if body != want {
		t.Errorf("/healthz body\n%s\nwant\n%s", body, want)
	}

	hs.QueuedUpdate(v1.IPv4Protocol)
	fc.Step(time.Minute)
	_, body = probe(t, hs, "/livez")
	want = `{"lastUpdated":"2026-01-02T03:04:05Z","currentTime":"2026-01-02T03:05:15Z","healthy":false,"status":{"IPv4":{"lastUpdated":"2026-01-02T03:04:05Z","healthy":false}}}`
	if body != want {
		t.Errorf("/livez body\n%s\nwant\n%s", body, want)
	}

	fresh, _, _ := newTestProxyHealth()
	code, body := probe(t, fresh, "/healthz")
	want = `{"lastUpdated":"0001-01-01T00:00:00Z","currentTime":"2026-01-02T03:04:05Z","nodeEligible":false,"healthy":true}`
	if code != 503 || body != want {
		t.Errorf("no node: %d %s, want 503 %s", code, body, want)
	}
	var parsed ProxyHealth
	if err := json.Unmarshal([]byte(body), &parsed); err != nil {
		t.Fatal(err)
	}
}

type funcListener func(ctx context.Context, network, address string) (net.Listener, error)

func (f funcListener) Listen(ctx context.Context, network, address string) (net.Listener, error) {
	return f(ctx, network, address)
}

func TestProxyHealthRun(t *testing.T) {
	hs, _, _ := newTestProxyHealth()
	hs.SyncNode(readyNode())
	addrCh := make(chan string, 1)
	hs.cfg.Listener = funcListener(func(ctx context.Context, network, address string) (net.Listener, error) {
		ln, err := NetListener{}.Listen(ctx, network, address)
		if err == nil {
			addrCh <- ln.Addr().String()
		}
		return ln, err
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- hs.Run(ctx) }()
	var addr string
	select {
	case addr = <-addrCh:
	case <-time.After(5 * time.Second):
		t.Fatal("not listening")
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("status %d", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
}

func TestProxyHealthHardFail(t *testing.T) {
	hs, _, _ := newTestProxyHealth()
	errBind := errors.New("in use")
	hs.cfg.BindAddressHardFail = true
	hs.cfg.Listener = funcListener(func(context.Context, string, string) (net.Listener, error) { return nil, errBind })
	if err := hs.Run(context.Background()); !errors.Is(err, errBind) {
		t.Fatalf("Run = %v, want %v", err, errBind)
	}
}
