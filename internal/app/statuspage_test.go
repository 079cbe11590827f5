package app

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/inspect"
	"github.com/kproxy/kproxy/internal/metrics"
	"github.com/kproxy/kproxy/internal/model"
)

// TestStatusPageBesideStateAPI: the metrics server serves the status page at
// /kproxy/ and the state API under /kproxy/v1alpha1/, and /statusz lists neither.
func TestStatusPageBesideStateAPI(t *testing.T) {
	r := execute(t, "--proxy-mode=nftables")
	if r.err != nil {
		t.Fatal(r.err)
	}
	src := &inspect.Source{NodeName: "node-a", Mode: "nftables",
		Families: []inspect.Family{{State: model.NewState(v1.IPv4Protocol, "node-a")}}}
	_, ms := healthAndMetrics(r.cfg, metrics.New(nil), &metricsRegistry{registry: prometheus.NewRegistry()}, src)
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		ms.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	if rec := get("/kproxy/"); rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") ||
		!strings.Contains(rec.Body.String(), "kproxy on <span id=\"node-name\">node-a</span>") {
		t.Errorf("GET /kproxy/: %d %s\n%s", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
	}
	if rec := get("/kproxy/v1alpha1/node"); rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("GET /kproxy/v1alpha1/node: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	if rec := get("/kproxy/v1alpha1/nothing"); rec.Code != 404 || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("GET /kproxy/v1alpha1/nothing: %d %s, want the state API's JSON 404", rec.Code, rec.Header().Get("Content-Type"))
	}
	if rec := get("/statusz"); strings.Contains(rec.Body.String(), "/kproxy") {
		t.Errorf("/statusz lists kproxy's own paths:\n%s", rec.Body.String())
	}
}
