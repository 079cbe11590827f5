package app

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiversion "k8s.io/apimachinery/pkg/version"
	k8smetrics "k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/config"
	"github.com/kproxy/kproxy/internal/metrics"
	"github.com/kproxy/kproxy/internal/metrics/metricstest"
	"github.com/kproxy/kproxy/internal/watch"
)

// upstreamTestdata is where internal/metrics keeps upstream's captured families.
const upstreamTestdata = "../metrics/testdata"

// fakeAPIServer answers every request with a Node, enough for client-go to record
// its rest_client_* metrics; it returns a kubeconfig pointing at it.
func fakeAPIServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"node1"}}`)
	}))
	t.Cleanup(srv.Close)
	return writeFile(t, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, srv.URL))
}

// daemonGatherer is /metrics as newDaemon wires it for args, after one API request.
func daemonGatherer(t *testing.T, args ...string) (*config.Config, prometheus.Gatherer) {
	t.Helper()
	r := execute(t, append([]string{"--kubeconfig=" + fakeAPIServer(t)}, args...)...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	var readers metrics.RegisterOptions
	if r.cfg.Mode == config.ProxyModeIPTables {
		readers.IPTablesCounters = func(context.Context, string) (uint64, error) { return 0, nil }
	}
	m, g, err := newDaemonMetrics(r.cfg, readers)
	if err != nil {
		t.Fatal(err)
	}
	m.ServiceChanged(0)
	client, err := watch.NewClient(context.Background(), clientConnection(r.cfg))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = client.CoreV1().Nodes().Get(context.Background(), "node1", metav1.GetOptions{})
	return r.cfg, g
}

// upstreamArtifacts are families upstream's binary exposes only because it links
// k8s.io/apiserver packages whose init registers them into the legacy registry;
// kube-proxy never updates them (always 0) and kproxy does not link those packages.
var upstreamArtifacts = []string{
	"aggregator_discovery_aggregation_count_total",
	"apiserver_audit_event_total",
	"apiserver_audit_requests_rejected_total",
	"apiserver_envelope_encryption_dek_cache_fill_percent",
	"apiserver_storage_data_key_generation_duration_seconds",
	"apiserver_storage_data_key_generation_failures_total",
	"apiserver_storage_envelope_transformation_cache_misses_total",
	"apiserver_validation_declarative_validation_mismatch_total",
	"apiserver_validation_declarative_validation_panic_total",
	"apiserver_validation_duplicate_validation_error_total",
	"apiserver_webhooks_x509_insecure_sha1_total",
	"apiserver_webhooks_x509_missing_san_total",
}

// TestMetricsExpositionMatchesUpstream compares the process-wide families of
// /metrics (everything but kubeproxy_* and kubernetes_build_info, which
// internal/metrics compares) with upstream's scrape: rest_client_*,
// kubernetes_feature_enabled, the registry meta metrics, process_*. The go_*
// families follow the Go toolchain, so only a core of them is required.
func TestMetricsExpositionMatchesUpstream(t *testing.T) {
	for _, mode := range []string{"nftables", "iptables"} {
		t.Run(mode, func(t *testing.T) {
			_, g := daemonGatherer(t, "--proxy-mode="+mode)
			got, err := metricstest.Gather(g)
			if err != nil {
				t.Fatalf("scrape: %v", err)
			}
			upstream, err := metricstest.ReadFile(filepath.Join(upstreamTestdata, "upstream-v1.37.2-"+mode+".families"))
			if err != nil {
				t.Fatal(err)
			}
			processWide := func(name string) bool {
				return !strings.HasPrefix(name, "kubeproxy_") && name != "kubernetes_build_info" &&
					!strings.HasPrefix(name, "go_") && !slices.Contains(upstreamArtifacts, name)
			}
			for _, d := range metricstest.Diff(got, upstream, processWide) {
				t.Error(d)
			}
			have := metricstest.Index(got)
			for _, name := range []string{
				"go_goroutines", "go_gc_duration_seconds", "go_memstats_heap_alloc_bytes",
				"go_sched_gomaxprocs_threads", // only with all runtime/metrics, as upstream
				"kubernetes_build_info", "kubeproxy_sync_proxy_rules_service_changes_total",
			} {
				if _, ok := have[name]; !ok {
					t.Errorf("/metrics lacks %s", name)
				}
			}
		})
	}
}

// TestFeatureEnabledMatchesUpstream: one kubernetes_feature_enabled sample per known
// gate with upstream's name, stage and value for the default gates.
func TestFeatureEnabledMatchesUpstream(t *testing.T) {
	_, g := daemonGatherer(t, "--proxy-mode=nftables")
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		if mf.GetName() != "kubernetes_feature_enabled" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			got = append(got, fmt.Sprintf("kubernetes_feature_enabled{name=%q,stage=%q} %g", l["name"], l["stage"], m.GetGauge().GetValue()))
		}
	}
	slices.Sort(got)
	f, err := os.Open(filepath.Join(upstreamTestdata, "upstream-v1.37.2-feature-enabled.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var want []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
			want = append(want, line)
		}
	}
	slices.Sort(want)
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("missing %s", w)
		}
	}
	for _, s := range got {
		if !slices.Contains(want, s) {
			t.Errorf("unexpected %s", s)
		}
	}
}

// TestShowHiddenMetrics: --show-hidden-metrics-for-version switches component-base's
// show-hidden on, which re-registers the metrics that its registries hid.
func TestShowHiddenMetrics(t *testing.T) {
	// A registry that knows it is 1.37 hides an ALPHA metric deprecated in 1.36.
	saved := k8smetrics.BuildVersion
	k8smetrics.BuildVersion = func() apiversion.Info { return apiversion.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2"} }
	reg := k8smetrics.NewKubeRegistry()
	k8smetrics.BuildVersion = saved
	c := k8smetrics.NewCounter(&k8smetrics.CounterOpts{Name: "kproxy_test_deprecated_total", Help: "h",
		StabilityLevel: k8smetrics.ALPHA, DeprecatedVersion: "1.36.0"})
	reg.MustRegister(c)
	exposed := func() bool {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "kproxy_test_deprecated_total" {
				return true
			}
		}
		return false
	}
	if k8smetrics.ShouldShowHidden() {
		t.Log("show-hidden already on in this process; checking only that the metric is shown")
	} else {
		if exposed() {
			t.Fatal("deprecated metric shown before --show-hidden-metrics-for-version")
		}
		daemonGatherer(t, "--proxy-mode=nftables")
		if k8smetrics.ShouldShowHidden() || exposed() {
			t.Fatal("show-hidden switched on without the flag")
		}
	}
	daemonGatherer(t, "--proxy-mode=nftables", "--show-hidden-metrics-for-version=1.36")
	if !k8smetrics.ShouldShowHidden() {
		t.Fatal("show-hidden still off")
	}
	if !exposed() {
		t.Error("hidden metric not shown after --show-hidden-metrics-for-version=1.36")
	}
}

// TestDebugFlagsVSetsVerbosity: with --profiling the metrics server takes
// PUT /debug/flags/v and sets the process's klog verbosity (logs.GlogSetter).
func TestDebugFlagsVSetsVerbosity(t *testing.T) {
	r := execute(t, "--profiling")
	if r.err != nil {
		t.Fatal(r.err)
	}
	_, ms := healthAndMetrics(r.cfg, metrics.New(nil), &metricsRegistry{registry: prometheus.NewRegistry()}, nil)
	if klog.V(7).Enabled() {
		t.Skip("verbosity already 7 or more")
	}
	put := func(level string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		ms.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPut, "/debug/flags/v", strings.NewReader(level)))
		return rec
	}
	t.Cleanup(func() { put("0") })
	if rec := put("7"); rec.Code != 200 || rec.Body.String() != "successfully set klog.logging.verbosity to 7\n" {
		t.Fatalf("PUT 7 = %d %q", rec.Code, rec.Body.String())
	}
	if !klog.V(7).Enabled() {
		t.Error("verbosity not raised to 7")
	}
	if rec := put("x"); rec.Code != 400 {
		t.Errorf("PUT x = %d %q", rec.Code, rec.Body.String())
	}

	r = execute(t)
	_, ms = healthAndMetrics(r.cfg, metrics.New(nil), &metricsRegistry{registry: prometheus.NewRegistry()}, nil)
	if rec := put("7"); rec.Code != 404 {
		t.Errorf("PUT /debug/flags/v without --profiling = %d, want 404", rec.Code)
	}
}
