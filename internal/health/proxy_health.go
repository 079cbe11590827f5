package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kproxy/kproxy/internal/metrics"
)

// ToBeDeletedTaint is the taint the Cluster Autoscaler puts on a node it will delete.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// ProxierHealth is the health of the proxier of one IP family.
type ProxierHealth struct {
	LastUpdated time.Time `json:"lastUpdated"`
	Healthy     bool      `json:"healthy"`
}

// ProxyHealth is the JSON body of /healthz and /livez (field order is upstream's).
type ProxyHealth struct {
	// LastUpdated is the latest Updated time of any family.
	LastUpdated  time.Time `json:"lastUpdated"`
	CurrentTime  time.Time `json:"currentTime"`
	NodeEligible *bool     `json:"nodeEligible,omitempty"`
	// Healthy is true when every family is healthy.
	Healthy bool                          `json:"healthy"`
	Status  map[v1.IPFamily]ProxierHealth `json:"status,omitempty"`
}

// ProxierHealthUpdater is what a proxier needs from the ProxyHealthServer.
type ProxierHealthUpdater interface {
	QueuedUpdate(family v1.IPFamily)
	Updated(family v1.IPFamily)
}

var _ ProxierHealthUpdater = (*ProxyHealthServer)(nil)

// HealthChecker reports the proxy's health; ServiceHealthServer uses it.
type HealthChecker interface {
	Health() ProxyHealth
}

// ProxyHealthConfig configures a ProxyHealthServer.
type ProxyHealthConfig struct {
	// BindAddress is host:port (healthzBindAddress). Empty: Run returns nil at once
	// (health tracking still works for the service health checks).
	BindAddress string
	// HealthTimeout is how long an update may stay queued (2 * syncPeriod).
	HealthTimeout time.Duration
	// BindAddressHardFail makes Run return listen/serve failures instead of retrying.
	BindAddressHardFail bool
	// Metrics receives the healthz/livez counters (nil: not counted).
	Metrics *metrics.Metrics
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Listener defaults to NetListener.
	Listener Listener
	// RetryInterval between soft-fail listen attempts (5s if zero).
	RetryInterval time.Duration
}

// ProxyHealthServer tracks proxier health and serves /healthz and /livez; see the
// package documentation. Its methods are safe for concurrent use.
type ProxyHealthServer struct {
	cfg ProxyHealthConfig

	lock               sync.RWMutex
	lastUpdated        map[v1.IPFamily]time.Time
	oldestPendingQueue map[v1.IPFamily]time.Time
	node               *v1.Node
}

// NewProxyHealthServer returns a ProxyHealthServer; it opens nothing.
func NewProxyHealthServer(cfg ProxyHealthConfig) *ProxyHealthServer {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Listener == nil {
		cfg.Listener = NetListener{}
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = 5 * time.Second
	}
	return &ProxyHealthServer{
		cfg:                cfg,
		lastUpdated:        map[v1.IPFamily]time.Time{},
		oldestPendingQueue: map[v1.IPFamily]time.Time{},
	}
}

// Updated records that the family's proxier has applied all changes it had.
func (hs *ProxyHealthServer) Updated(family v1.IPFamily) {
	hs.lock.Lock()
	defer hs.lock.Unlock()
	delete(hs.oldestPendingQueue, family)
	hs.lastUpdated[family] = hs.cfg.Clock.Now()
}

// QueuedUpdate records that the family's proxier received a change it has not yet
// applied; only the oldest unapplied change counts.
func (hs *ProxyHealthServer) QueuedUpdate(family v1.IPFamily) {
	hs.lock.Lock()
	defer hs.lock.Unlock()
	if _, pending := hs.oldestPendingQueue[family]; !pending {
		hs.oldestPendingQueue[family] = hs.cfg.Clock.Now()
	}
}

// SyncNode records the current state of this kube-proxy's Node (nil: unknown).
// The server keeps the pointer and only reads it; pass a fresh object on change.
func (hs *ProxyHealthServer) SyncNode(node *v1.Node) {
	hs.lock.Lock()
	defer hs.lock.Unlock()
	hs.node = node
}

// Health returns the proxy's health, ignoring node eligibility.
func (hs *ProxyHealthServer) Health() ProxyHealth {
	hs.lock.RLock()
	defer hs.lock.RUnlock()

	health := ProxyHealth{Healthy: true, Status: map[v1.IPFamily]ProxierHealth{}}
	now := hs.cfg.Clock.Now()
	health.CurrentTime = now
	for family, updated := range hs.lastUpdated {
		if updated.After(health.LastUpdated) {
			health.LastUpdated = updated
		}
		healthy := true
		if queued, pending := hs.oldestPendingQueue[family]; pending && now.Sub(queued) >= hs.cfg.HealthTimeout {
			healthy = false
			health.Healthy = false
		}
		health.Status[family] = ProxierHealth{LastUpdated: updated, Healthy: healthy}
	}
	return health
}

// NodeEligible reports whether the node is known, not being deleted, and not
// tainted for deletion by the Cluster Autoscaler.
func (hs *ProxyHealthServer) NodeEligible() bool {
	hs.lock.RLock()
	defer hs.lock.RUnlock()
	node := hs.node
	if node == nil || !node.DeletionTimestamp.IsZero() {
		return false
	}
	for _, taint := range node.Spec.Taints {
		if taint.Key == ToBeDeletedTaint {
			return false
		}
	}
	return true
}

// Handler returns the /healthz and /livez mux.
func (hs *ProxyHealthServer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", hs.serveHealthz)
	mux.HandleFunc("/livez", hs.serveLivez)
	return mux
}

func (hs *ProxyHealthServer) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	health := hs.Health()
	eligible := hs.NodeEligible()
	health.NodeEligible = &eligible
	code := hs.writeHealth(w, health, health.Healthy && eligible)
	hs.cfg.Metrics.ProxyHealthz(code)
}

func (hs *ProxyHealthServer) serveLivez(w http.ResponseWriter, _ *http.Request) {
	health := hs.Health()
	code := hs.writeHealth(w, health, health.Healthy)
	hs.cfg.Metrics.ProxyLivez(code)
}

func (hs *ProxyHealthServer) writeHealth(w http.ResponseWriter, health ProxyHealth, healthy bool) int {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	code := http.StatusServiceUnavailable
	if healthy {
		code = http.StatusOK
		// Older releases reported the last sync-loop run here even when nothing
		// changed; upstream keeps a "recent" value while healthy, and so do we.
		health.LastUpdated = hs.cfg.Clock.Now()
	}
	w.WriteHeader(code)
	body, _ := json.Marshal(health)
	_, _ = w.Write(body)
	return code
}

// Run serves /healthz and /livez on BindAddress until ctx is cancelled; see the
// package documentation for failure handling.
func (hs *ProxyHealthServer) Run(ctx context.Context) error {
	if hs.cfg.BindAddress == "" {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("address", hs.cfg.BindAddress)
	handler := hs.Handler()
	for {
		err := hs.serveOnce(ctx, handler)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = errors.New("server stopped unexpectedly")
		}
		if hs.cfg.BindAddressHardFail {
			return fmt.Errorf("proxy healthz server on %s: %w", hs.cfg.BindAddress, err)
		}
		logger.Error(err, "Healthz server failed, retrying", "retryInterval", hs.cfg.RetryInterval)
		t := time.NewTimer(hs.cfg.RetryInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

func (hs *ProxyHealthServer) serveOnce(ctx context.Context, handler http.Handler) error {
	ln, err := hs.cfg.Listener.Listen(ctx, "tcp", hs.cfg.BindAddress)
	if err != nil {
		return fmt.Errorf("failed to start proxy healthz on %s: %w", hs.cfg.BindAddress, err)
	}
	klog.FromContext(ctx).V(3).Info("Starting healthz HTTP server", "address", ln.Addr().String())
	return metrics.ServeUntilDone(ctx, &http.Server{Handler: handler, ReadHeaderTimeout: 30 * time.Second}, ln)
}
