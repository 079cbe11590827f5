package metrics

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/pprof"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// zpagesWarning is the second header line of /flagz and /statusz, as upstream.
const zpagesWarning = "Warning: This endpoint is not meant to be machine parseable, has no formatting compatibility guarantees and is for debugging purposes only."

func newMux(cfg *ServerConfig) http.Handler {
	mux := http.NewServeMux()
	var listed []string
	handle := func(path string, h http.Handler) {
		mux.Handle(path, h)
		listed = append(listed, path)
	}

	slis := newSLIMetrics(cfg.StartTime)
	handle("/healthz", healthzHandler(slis))
	handle("/healthz/ping", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }))
	handle("/metrics/slis", slis.handler())
	handle("/proxyMode", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		fmt.Fprint(w, cfg.ProxyMode)
	}))
	handle("/metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{ProcessStartTime: cfg.StartTime}))

	if cfg.EnableProfiling {
		// Unlisted, as upstream.
		mux.Handle("/debug/pprof", http.RedirectHandler("/debug/pprof/", http.StatusFound))
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		if cfg.SetVerbosity != nil {
			// As apiserver's routes.DebugFlags: an index of the settable flags at
			// /debug/flags and below, and the setter at /debug/flags/v.
			mux.HandleFunc("/debug/flags", debugFlagsIndex)
			mux.HandleFunc("/debug/flags/", debugFlagsIndex)
			mux.HandleFunc("/debug/flags/v", flagPutHandler(cfg.SetVerbosity))
		}
	}

	for pattern, h := range cfg.Unlisted {
		mux.Handle(pattern, h)
	}

	handle("/configz", configzHandler(cfg.ConfigzName, cfg.Config))
	if cfg.Flags != nil {
		handle("/flagz", flagzHandler(cfg.ComponentName, cfg.Flags))
	}
	if !cfg.DisableStatusz {
		paths := slices.Clone(listed)
		mux.Handle("/statusz", statuszHandler(cfg, paths))
	}
	return mux
}

// healthzHandler mirrors apiserver's healthz root handler with its single ping check.
func healthzHandler(slis *sliMetrics) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		slis.observe("ping", "healthz", true)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if _, verbose := r.URL.Query()["verbose"]; !verbose {
			fmt.Fprint(w, "ok")
			return
		}
		fmt.Fprint(w, "[+]ping ok\nhealthz check passed\n")
	}
}

func configzHandler(name string, config any) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		b, err := json.Marshal(map[string]any{name: config})
		if err != nil {
			http.Error(w, fmt.Sprintf("error marshaling json: %v", err), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(b)
	}
}

// flagzHandler serves upstream's text/plain flagz format. Upstream picks the
// separator at random among ":", ": ", "=", " " to discourage parsing; we always use
// ": ", one of its choices.
func flagzHandler(component string, flags FlagReader) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		WriteFlagz(w, component, flags.GetFlagz())
	}
}

// WriteFlagz writes flags in the /flagz text format.
func WriteFlagz(w io.Writer, component string, flags map[string]string) {
	fmt.Fprintf(w, "\n%s flagz\n%s\n", component, zpagesWarning)
	keys := make([]string, 0, len(flags))
	for k := range flags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%s: %s\n", k, flags[k])
	}
}

func statuszHandler(cfg *ServerConfig, listed []string) http.HandlerFunc {
	paths := topLevelPaths(listed)
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		up := int64(time.Since(cfg.StartTime).Seconds())
		fmt.Fprintf(w, "\n%s statusz\n%s\n", cfg.ComponentName, zpagesWarning)
		emulation := ""
		if cfg.EmulationVersion != "" {
			emulation = "Emulation version: " + html.EscapeString(cfg.EmulationVersion)
		}
		fmt.Fprintf(w, "\nStarted: %s\nUp: %s\nGo version: %s\nBinary version: %s\n%s\nPaths: %s\n",
			html.EscapeString(cfg.StartTime.Format(time.UnixDate)),
			fmt.Sprintf("%d hr %02d min %02d sec", up/3600, (up/60)%60, up%60),
			html.EscapeString(runtime.Version()),
			html.EscapeString(cfg.BinaryVersion),
			emulation,
			html.EscapeString(strings.Join(paths, " ")))
	}
}

// topLevelPaths reduces paths to their sorted, distinct first segments, as statusz does.
func topLevelPaths(listed []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range listed {
		parts := strings.Split(p, "/")
		if len(parts) < 2 || parts[1] == "" {
			continue
		}
		top := "/" + parts[1]
		if !seen[top] {
			seen[top] = true
			out = append(out, top)
		}
	}
	slices.Sort(out)
	return out
}

// debugFlagsIndex lists the flags settable under /debug/flags (only "v"), in the
// HTML of apiserver's routes.DebugFlags.
func debugFlagsIndex(w http.ResponseWriter, _ *http.Request) {
	_, _ = io.WriteString(w, `<html>
<head>
<title>/debug/flags/</title>
</head>
<body>
/debug/flags/<br>
<br>
flags:<br>
<table>
<tr>v<br>
</table>
<br>
full flags configurable<br>
</body>
</html>
`)
}

// maxFlagBody bounds a PUT /debug/flags/v body; a level is a few bytes.
const maxFlagBody = 64 << 10

// flagPutHandler is apiserver's routes.StringFlagPutHandler: PUT passes the body,
// verbatim, to set and answers its message (200) or error (400) as a text/plain
// line; any other method is 406.
func flagPutHandler(set func(string) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			writePlainText(w, http.StatusNotAcceptable, "unsupported http method")
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxFlagBody))
		if err != nil {
			writePlainText(w, http.StatusBadRequest, "error reading request body: "+err.Error())
			return
		}
		msg, err := set(string(body))
		if err != nil {
			writePlainText(w, http.StatusBadRequest, err.Error())
			return
		}
		writePlainText(w, http.StatusOK, msg)
	}
}

func writePlainText(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintln(w, text)
}

// sliMetrics is what component-base's /metrics/slis exposes for the healthz checks.
type sliMetrics struct {
	reg         *prometheus.Registry
	healthcheck *prometheus.GaugeVec
	total       *prometheus.CounterVec
}

func newSLIMetrics(start time.Time) *sliMetrics {
	s := &sliMetrics{
		reg: prometheus.NewRegistry(),
		healthcheck: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "kubernetes", Name: "healthcheck",
			Help: "[STABLE] This metric records the result of a single healthcheck."}, []string{"name", "type"}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kubernetes", Name: "healthchecks_total",
			Help: "[STABLE] This metric records the results of all healthcheck."}, []string{"name", "type", "status"}),
	}
	startGauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "process_start_time_seconds",
		Help: "[ALPHA] Start time of the process since unix epoch in seconds."})
	startGauge.Set(unixSeconds(start))
	s.reg.MustRegister(s.healthcheck, s.total, startGauge)
	return s
}

func (s *sliMetrics) observe(name, kind string, ok bool) {
	v, status := 0.0, "error"
	if ok {
		v, status = 1, "success"
	}
	s.healthcheck.WithLabelValues(name, kind).Set(v)
	s.total.WithLabelValues(name, kind, status).Inc()
}

// handler serves the SLI registry; DELETE resets the health metrics, as upstream's
// HandlerWithReset.
func (s *sliMetrics) handler() http.Handler {
	h := promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			s.healthcheck.Reset()
			s.total.Reset()
			_, _ = io.WriteString(w, "metrics reset\n")
			return
		}
		h.ServeHTTP(w, r)
	})
}
