package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type fakeFlags map[string]string

func (f fakeFlags) GetFlagz() map[string]string { return f }

func get(t *testing.T, h http.Handler, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

func testServer(profiling bool) *Server {
	reg := prometheus.NewRegistry()
	m := New(reg)
	_ = m.Register(RegisterOptions{Mode: ModeNFTables})
	m.ServiceChanged(0)
	return NewServer(ServerConfig{
		BindAddress:     "127.0.0.1:0",
		ProxyMode:       "nftables",
		Gatherer:        reg,
		Config:          map[string]any{"apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration", "mode": "nftables"},
		Flags:           fakeFlags{"v": "2", "proxy-mode": "nftables", "cluster-cidr": "10.0.0.0/8"},
		BinaryVersion:   "v1.37.2",
		EnableProfiling: profiling,
		StartTime:       time.Unix(0, 0),
	})
}

func TestServerEndpoints(t *testing.T) {
	h := testServer(false).Handler()
	tests := []struct {
		path        string
		wantCode    int
		wantBody    string // exact when wantContains is empty
		contains    []string
		contentType string
	}{
		{path: "/proxyMode", wantCode: 200, wantBody: "nftables", contentType: "text/plain; charset=utf-8"},
		{path: "/healthz", wantCode: 200, wantBody: "ok", contentType: "text/plain; charset=utf-8"},
		{path: "/healthz?verbose", wantCode: 200, wantBody: "[+]ping ok\nhealthz check passed\n"},
		{path: "/healthz/ping", wantCode: 200, wantBody: "ok"},
		{path: "/configz", wantCode: 200, contentType: "application/json",
			wantBody: `{"kubeproxy.config.k8s.io":{"apiVersion":"kubeproxy.config.k8s.io/v1alpha1","kind":"KubeProxyConfiguration","mode":"nftables"}}`},
		{path: "/flagz", wantCode: 200, contentType: "text/plain; charset=utf-8",
			wantBody: "\nkube-proxy flagz\n" + zpagesWarning + "\ncluster-cidr: 10.0.0.0/8\nproxy-mode: nftables\nv: 2\n"},
		{path: "/metrics", wantCode: 200, contains: []string{
			"# HELP kubeproxy_sync_proxy_rules_service_changes_total [ALPHA] Cumulative proxy rules Service changes",
			"kubeproxy_sync_proxy_rules_service_changes_total 1",
		}},
		{path: "/metrics/slis", wantCode: 200, contains: []string{"kubernetes_healthcheck{name=\"ping\",type=\"healthz\"} 1"}},
		{path: "/statusz", wantCode: 200, contains: []string{
			"\nkube-proxy statusz\n", "Binary version: v1.37.2\n",
			"Paths: /configz /flagz /healthz /metrics /proxyMode\n",
		}},
		{path: "/debug/pprof/", wantCode: 404},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			rec := get(t, h, tc.path)
			if rec.Code != tc.wantCode {
				t.Fatalf("code %d, want %d; body %q", rec.Code, tc.wantCode, rec.Body.String())
			}
			if tc.contentType != "" && rec.Header().Get("Content-Type") != tc.contentType {
				t.Errorf("Content-Type %q, want %q", rec.Header().Get("Content-Type"), tc.contentType)
			}
			body := rec.Body.String()
			if tc.contains == nil && tc.wantBody != "" && body != tc.wantBody {
				t.Errorf("body\n%q\nwant\n%q", body, tc.wantBody)
			}
			for _, c := range tc.contains {
				if !strings.Contains(body, c) {
					t.Errorf("body lacks %q:\n%s", c, body)
				}
			}
		})
	}
}

func TestProfilingOnlyWhenEnabled(t *testing.T) {
	h := testServer(true).Handler()
	if rec := get(t, h, "/debug/pprof/"); rec.Code != 200 {
		t.Fatalf("/debug/pprof/ = %d with profiling on", rec.Code)
	}
	// Still unlisted in statusz.
	if rec := get(t, h, "/statusz"); strings.Contains(rec.Body.String(), "/debug") {
		t.Errorf("statusz lists /debug: %s", rec.Body.String())
	}
}

func TestRunServesAndShutsDown(t *testing.T) {
	var addr atomic.Value
	s := testServer(false)
	s.cfg.Listen = func(ctx context.Context, network, address string) (net.Listener, error) {
		ln, err := (&net.ListenConfig{}).Listen(ctx, network, address)
		if err == nil {
			addr.Store(ln.Addr().String())
		}
		return ln, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	deadline := time.Now().Add(5 * time.Second)
	for addr.Load() == nil {
		if time.Now().After(deadline) {
			t.Fatal("server never listened")
		}
		time.Sleep(5 * time.Millisecond)
	}
	resp, err := http.Get("http://" + addr.Load().(string) + "/proxyMode")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "nftables" {
		t.Errorf("body %q", body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v after cancel", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
}

func TestBindFailure(t *testing.T) {
	errBind := errors.New("address in use")
	t.Run("hard fail returns the error", func(t *testing.T) {
		s := testServer(false)
		s.cfg.BindAddressHardFail = true
		s.cfg.Listen = func(context.Context, string, string) (net.Listener, error) { return nil, errBind }
		if err := s.Run(context.Background()); !errors.Is(err, errBind) {
			t.Fatalf("Run = %v, want %v", err, errBind)
		}
	})
	t.Run("soft fail retries", func(t *testing.T) {
		s := testServer(false)
		s.cfg.RetryInterval = time.Millisecond
		var calls atomic.Int32
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s.cfg.Listen = func(ctx context.Context, network, address string) (net.Listener, error) {
			if calls.Add(1) < 3 {
				return nil, errBind
			}
			cancel() // third attempt: stop the test here
			return nil, errBind
		}
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Run = %v, want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return")
		}
		if calls.Load() != 3 {
			t.Errorf("listened %d times, want 3", calls.Load())
		}
	})
	t.Run("empty address disables", func(t *testing.T) {
		s := NewServer(ServerConfig{})
		if err := s.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

func do(t *testing.T, h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	return rec
}

// TestDebugFlags pins /debug/flags to upstream's (apiserver's routes.DebugFlags with
// StringFlagPutHandler, as kube-proxy v1.37.2 answers): served only with profiling.
func TestDebugFlags(t *testing.T) {
	var got []string
	set := func(v string) (string, error) {
		got = append(got, v)
		if v != "3" {
			return "", errors.New(`strconv.ParseUint: parsing "` + v + `": invalid syntax`)
		}
		return "successfully set klog.logging.verbosity to " + v, nil
	}
	cfg := ServerConfig{EnableProfiling: true, SetVerbosity: set}
	h := NewServer(cfg).Handler()

	index := "<html>\n<head>\n<title>/debug/flags/</title>\n</head>\n<body>\n/debug/flags/<br>\n<br>\nflags:<br>\n<table>\n<tr>v<br>\n</table>\n<br>\nfull flags configurable<br>\n</body>\n</html>\n"
	for _, path := range []string{"/debug/flags", "/debug/flags/", "/debug/flags/x"} {
		rec := do(t, h, http.MethodGet, path, "")
		if rec.Code != 200 || rec.Body.String() != index || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" {
			t.Errorf("GET %s = %d %q %q", path, rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
		}
	}
	for _, tc := range []struct {
		method, body string
		code         int
		answer       string
	}{
		{http.MethodPut, "3", 200, "successfully set klog.logging.verbosity to 3\n"},
		{http.MethodPut, "abc", 400, "strconv.ParseUint: parsing \"abc\": invalid syntax\n"},
		// The body goes to the setter verbatim, as upstream: a trailing newline fails.
		{http.MethodPut, "3\n", 400, "strconv.ParseUint: parsing \"3\n\": invalid syntax\n"},
		{http.MethodGet, "", 406, "unsupported http method\n"},
		{http.MethodPost, "3", 406, "unsupported http method\n"},
	} {
		rec := do(t, h, tc.method, "/debug/flags/v", tc.body)
		if rec.Code != tc.code || rec.Body.String() != tc.answer || rec.Header().Get("Content-Type") != "text/plain" {
			t.Errorf("%s %q = %d %q %q, want %d %q", tc.method, tc.body, rec.Code,
				rec.Header().Get("Content-Type"), rec.Body.String(), tc.code, tc.answer)
		}
	}
	if want := []string{"3", "abc", "3\n"}; !slices.Equal(got, want) {
		t.Errorf("setter got %q, want %q", got, want)
	}

	cfg.EnableProfiling = false
	off := NewServer(cfg).Handler()
	for _, path := range []string{"/debug/flags", "/debug/flags/v", "/debug/pprof/"} {
		if rec := do(t, off, http.MethodPut, path, "3"); rec.Code != 404 {
			t.Errorf("%s without profiling = %d, want 404", path, rec.Code)
		}
	}
}
