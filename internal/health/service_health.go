package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
)

// ServiceHealthConfig configures a ServiceHealthServer.
type ServiceHealthConfig struct {
	// NodeName appears in the failure Event's message.
	NodeName string
	// Recorder receives the FailedToStartServiceHealthcheck Warning; nil: no events.
	Recorder events.EventRecorder
	// Family selects the socket family: tcp4 / tcp6, or tcp when empty.
	Family v1.IPFamily
	// Addresses are the node addresses to listen on (those selected by
	// nodePortAddresses for this family). Empty: the family's wildcard address.
	Addresses []netip.Addr
	// ProxyHealth supplies serviceProxyHealthy (nil: always healthy).
	ProxyHealth HealthChecker
	// Listener defaults to NetListener.
	Listener Listener
	// Logger defaults to klog.Background() (the methods take no context).
	Logger klog.Logger
}

// ServiceHealthServer serves the healthCheckNodePorts of one IP family; see the
// package documentation. Its methods are safe for concurrent use.
type ServiceHealthServer struct {
	cfg     ServiceHealthConfig
	network string
	hosts   []string

	lock     sync.RWMutex
	services map[types.NamespacedName]*serviceListeners
	closed   bool
}

type serviceListeners struct {
	port      uint16
	servers   []*http.Server
	listeners []net.Listener
	endpoints int
}

// NewServiceHealthServer returns a ServiceHealthServer; it opens nothing.
func NewServiceHealthServer(cfg ServiceHealthConfig) *ServiceHealthServer {
	if cfg.Listener == nil {
		cfg.Listener = NetListener{}
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = klog.Background()
	}
	s := &ServiceHealthServer{cfg: cfg, services: map[types.NamespacedName]*serviceListeners{}}
	switch cfg.Family {
	case v1.IPv4Protocol:
		s.network, s.hosts = "tcp4", []string{"0.0.0.0"}
	case v1.IPv6Protocol:
		s.network, s.hosts = "tcp6", []string{"::"}
	default:
		s.network, s.hosts = "tcp", []string{"0.0.0.0"}
	}
	if len(cfg.Addresses) > 0 {
		s.hosts = s.hosts[:0]
		for _, a := range cfg.Addresses {
			s.hosts = append(s.hosts, a.String())
		}
	}
	return s
}

// SyncServices makes newServices (service -> healthCheckNodePort) the active set.
// Open failures are reported by Event and log, not returned; the error result is
// kept for interface compatibility and is nil unless the server was closed.
func (s *ServiceHealthServer) SyncServices(newServices map[types.NamespacedName]uint16) error {
	s.lock.Lock()
	defer s.lock.Unlock()
	if s.closed {
		return errors.New("service health server closed")
	}
	logger := s.cfg.Logger

	for name, svc := range s.services {
		if port, found := newServices[name]; !found || port != svc.port {
			logger.V(2).Info("Closing healthcheck", "service", name, "port", svc.port)
			svc.close()
			delete(s.services, name)
		}
	}

	for name, port := range newServices {
		if s.services[name] != nil {
			continue
		}
		logger.V(2).Info("Opening healthcheck", "service", name, "port", port)
		svc, err := s.open(name, port)
		if err != nil {
			msg := fmt.Sprintf("node %s failed to start healthcheck %q on port %d: %v", s.cfg.NodeName, name.String(), port, err)
			if s.cfg.Recorder != nil {
				s.cfg.Recorder.Eventf(&v1.ObjectReference{
					APIVersion: "v1",
					Kind:       "Service",
					Namespace:  name.Namespace,
					Name:       name.Name,
				}, nil, v1.EventTypeWarning, "FailedToStartServiceHealthcheck", "Listen", "%s", msg)
			}
			logger.Error(err, "Failed to start healthcheck", "node", s.cfg.NodeName, "service", name, "port", port)
			continue
		}
		s.services[name] = svc
	}
	return nil
}

// open listens on every host for one service; on any failure it closes what it
// opened, so that a later retry (or another owner of the port) starts clean.
func (s *ServiceHealthServer) open(name types.NamespacedName, port uint16) (*serviceListeners, error) {
	svc := &serviceListeners{port: port}
	for _, host := range s.hosts {
		addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
		ln, err := s.cfg.Listener.Listen(context.Background(), s.network, addr)
		if err != nil {
			svc.close()
			return nil, err
		}
		srv := &http.Server{Handler: serviceHandler{name: name, s: s}, ReadHeaderTimeout: 10 * time.Second}
		svc.servers = append(svc.servers, srv)
		svc.listeners = append(svc.listeners, ln)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.cfg.Logger.Error(err, "Healthcheck closed", "service", name)
			}
		}()
	}
	return svc, nil
}

func (svc *serviceListeners) close() {
	for _, srv := range svc.servers {
		// Close only fails with the listener's close error, which leaves nothing to do.
		_ = srv.Close()
	}
	// Serve may not have started yet, in which case srv.Close did not close its
	// listener; close it here so the port is free when close returns.
	for _, ln := range svc.listeners {
		_ = ln.Close()
	}
	svc.servers, svc.listeners = nil, nil
}

// SyncEndpoints sets each active service's local endpoint count; active services
// missing from newEndpoints get 0, unknown services are ignored.
func (s *ServiceHealthServer) SyncEndpoints(newEndpoints map[types.NamespacedName]int) error {
	s.lock.Lock()
	defer s.lock.Unlock()
	for name, svc := range s.services {
		svc.endpoints = newEndpoints[name]
	}
	return nil
}

// Ports returns the active services and their ports (for tests and debugging).
func (s *ServiceHealthServer) Ports() map[types.NamespacedName]uint16 {
	s.lock.RLock()
	defer s.lock.RUnlock()
	out := make(map[types.NamespacedName]uint16, len(s.services))
	for name, svc := range s.services {
		out[name] = svc.port
	}
	return out
}

// Close closes every listener; later SyncServices calls fail. The daemon calls it
// on shutdown.
func (s *ServiceHealthServer) Close() {
	s.lock.Lock()
	defer s.lock.Unlock()
	for name, svc := range s.services {
		svc.close()
		delete(s.services, name)
	}
	s.closed = true
}

type serviceHandler struct {
	name types.NamespacedName
	s    *ServiceHealthServer
}

func (h serviceHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.s.lock.RLock()
	svc, ok := h.s.services[h.name]
	count := 0
	if ok {
		count = svc.endpoints
	}
	h.s.lock.RUnlock()
	if !ok {
		// A request racing the close of its listener: upstream answers nothing.
		return
	}
	healthy := true
	if h.s.cfg.ProxyHealth != nil {
		healthy = h.s.cfg.ProxyHealth.Health().Healthy
	}

	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(count))
	if count != 0 && healthy {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintf(w, "{\n\t\"service\": {\n\t\t\"namespace\": %q,\n\t\t\"name\": %q\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": %v\n}",
		h.name.Namespace, h.name.Name, count, healthy)
}
