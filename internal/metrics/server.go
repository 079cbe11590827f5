package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// FlagReader supplies /flagz: flag name to (already redacted) value.
type FlagReader interface {
	GetFlagz() map[string]string
}

// ListenFunc opens a listener; tests inject one, the default is net.ListenConfig.Listen.
type ListenFunc func(ctx context.Context, network, address string) (net.Listener, error)

// ServerConfig configures the metrics HTTP server. Zero values are documented per field.
type ServerConfig struct {
	// BindAddress is host:port (metricsBindAddress). Empty disables the server:
	// Run returns nil at once.
	BindAddress string
	// BindAddressHardFail makes a listen or serve failure fatal (returned by Run).
	BindAddressHardFail bool
	// ProxyMode is served verbatim at /proxyMode.
	ProxyMode string
	// Gatherer is served at /metrics (usually the registry from NewRegistry).
	Gatherer prometheus.Gatherer
	// ComponentName names the component in /flagz and /statusz ("kube-proxy" if empty).
	ComponentName string
	// ConfigzName is the key of Config in /configz ("kubeproxy.config.k8s.io" if empty).
	ConfigzName string
	// Config is the effective configuration (the external v1alpha1 object with its
	// apiVersion and kind set, as upstream); it is JSON-encoded at each request.
	// nil serves {"<ConfigzName>":null}.
	Config any
	// Flags supplies /flagz; nil leaves /flagz unserved (ComponentFlagz disabled).
	Flags FlagReader
	// DisableStatusz leaves /statusz unserved (ComponentStatusz disabled).
	DisableStatusz bool
	// BinaryVersion and EmulationVersion are shown by /statusz (an empty
	// EmulationVersion leaves its line blank, as upstream).
	BinaryVersion    string
	EmulationVersion string
	// EnableProfiling serves /debug/pprof/* and, with SetVerbosity, /debug/flags
	// (an index) and /debug/flags/v, as upstream does only with profiling on.
	EnableProfiling bool
	// SetVerbosity handles PUT /debug/flags/v: it gets the body verbatim (the new
	// level) and returns the message to answer (component-base's logs.GlogSetter in
	// the daemon, as upstream). nil leaves /debug/flags unserved.
	SetVerbosity func(level string) (string, error)
	// StartTime is the process start, for /statusz and Process-Start-Time-Unix
	// (time.Now() at NewServer if zero).
	StartTime time.Time
	// RetryInterval is how long a soft-fail server waits before listening again
	// (5s if zero, as upstream).
	RetryInterval time.Duration
	// Listen opens the listener (net.ListenConfig.Listen if nil).
	Listen ListenFunc
	// Unlisted are kproxy's own handlers (the state API, internal/inspect), by mux
	// pattern; the index at "/" leaves them out, as it lists what upstream serves.
	Unlisted map[string]http.Handler
}

// Server is the metrics HTTP server; see the package documentation.
type Server struct {
	cfg     ServerConfig
	handler http.Handler
}

// NewServer builds the server and its handlers; it opens nothing.
func NewServer(cfg ServerConfig) *Server {
	if cfg.ComponentName == "" {
		cfg.ComponentName = "kube-proxy"
	}
	if cfg.ConfigzName == "" {
		cfg.ConfigzName = "kubeproxy.config.k8s.io"
	}
	if cfg.StartTime.IsZero() {
		cfg.StartTime = time.Now()
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = 5 * time.Second
	}
	if cfg.Listen == nil {
		var lc net.ListenConfig
		cfg.Listen = lc.Listen
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.NewRegistry()
	}
	return &Server{cfg: cfg, handler: newMux(&cfg)}
}

// Handler returns the server's mux (for tests and for embedding).
func (s *Server) Handler() http.Handler { return s.handler }

// shutdownTimeout bounds graceful shutdown; in-flight scrapes are short.
const shutdownTimeout = 5 * time.Second

// Run serves until ctx is cancelled and returns nil then. With BindAddressHardFail a
// listen or serve error is returned; without it, it is logged and retried every
// RetryInterval.
func (s *Server) Run(ctx context.Context) error {
	if s.cfg.BindAddress == "" {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("address", s.cfg.BindAddress)
	for {
		err := s.serveOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = errors.New("server stopped unexpectedly")
		}
		if s.cfg.BindAddressHardFail {
			return fmt.Errorf("metrics server on %s: %w", s.cfg.BindAddress, err)
		}
		logger.Error(err, "Metrics server failed, retrying", "retryInterval", s.cfg.RetryInterval)
		t := time.NewTimer(s.cfg.RetryInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// serveOnce listens and serves until ctx is cancelled (returns nil) or serving fails.
func (s *Server) serveOnce(ctx context.Context) error {
	ln, err := s.cfg.Listen(ctx, "tcp", s.cfg.BindAddress)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("Serving metrics", "address", ln.Addr().String())
	return ServeUntilDone(ctx, &http.Server{Handler: s.handler, ReadHeaderTimeout: 30 * time.Second}, ln)
}

// ServeUntilDone serves srv on ln until ctx is cancelled, then shuts it down
// gracefully (bounded) and returns nil; a serve failure before that is returned.
func ServeUntilDone(ctx context.Context, srv *http.Server, ln net.Listener) error {
	errCh := make(chan error, 1)
	go func() { errCh <- srv.Serve(ln) }()
	select {
	case err := <-errCh:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			_ = srv.Close()
		}
		// Serve returns http.ErrServerClosed once shut down; anything else failed before.
		if err := <-errCh; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}
