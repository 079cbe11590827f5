package localnodeports

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DialTimeout bounds the connection to an endpoint, as upstream's.
const DialTimeout = 5 * time.Second

// Interface is what the proxier side needs of a Manager.
type Interface interface {
	// Sync hands over the complete list of wanted listeners; it does not block on
	// traffic.
	Sync(specs []Spec)
}

// Metrics is what a Manager reports (*metrics.FamilyMetrics implements it).
type Metrics interface {
	// SetLocalhostNodePortListeners sets kubeproxy_nftables_localhost_nodeport_listeners.
	SetLocalhostNodePortListeners(n int)
	// IncLocalhostNodePortListenerFailures counts a listener that could not be bound
	// (kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total).
	IncLocalhostNodePortListenerFailures()
}

// Config configures a Manager. Family is required.
type Config struct {
	Family v1.IPFamily
	// Metrics may be nil.
	Metrics Metrics
	// Listen binds a listener; nil uses net.ListenConfig. Dial connects to an
	// endpoint; nil uses net.Dialer. (Tests replace them.)
	Listen func(ctx context.Context, network, address string) (net.Listener, error)
	Dial   func(ctx context.Context, network, address string) (net.Conn, error)
	// Clock times session affinity; nil is the real clock.
	Clock clock.PassiveClock
	// IntN picks an endpoint index in [0, n); nil is math/rand/v2.IntN.
	IntN func(n int) int
}

type runState int

const (
	notStarted runState = iota
	running
	stopped
)

// Manager runs the localhost NodePort listeners of one IP family; see the package
// documentation.
type Manager struct {
	cfg     Config
	address netip.Addr
	network string

	mu    sync.Mutex
	state runState
	// Set by Run.
	ctx    context.Context
	logger klog.Logger
	group  *errgroup.Group
	// desired is the last Sync's list; active the bound listeners by NodePort.
	desired []Spec
	active  map[uint16]*listener
}

var _ Interface = (*Manager)(nil)

// New returns a Manager; it binds nothing until Run.
func New(cfg Config) *Manager {
	if cfg.Listen == nil {
		lc := &net.ListenConfig{}
		cfg.Listen = lc.Listen
	}
	if cfg.Dial == nil {
		d := &net.Dialer{}
		cfg.Dial = d.DialContext
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.IntN == nil {
		cfg.IntN = rand.IntN
	}
	network := "tcp4"
	if cfg.Family == v1.IPv6Protocol {
		network = "tcp6"
	}
	return &Manager{cfg: cfg, address: ListenAddress(cfg.Family), network: network, active: map[uint16]*listener{}}
}

// Sync records specs as the wanted listeners and, while Run runs, reconciles now.
func (m *Manager) Sync(specs []Spec) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.desired = specs
	if m.state == running {
		m.reconcile()
	}
}

// Run serves the listeners until ctx is done, then closes them and their
// connections and returns nil once every goroutine ended.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.state != notStarted {
		m.mu.Unlock()
		return errors.New("localhost NodePort listeners: Run called twice")
	}
	m.ctx = ctx
	m.logger = klog.FromContext(ctx).WithValues("ipFamily", m.cfg.Family)
	m.group = &errgroup.Group{}
	m.state = running
	m.reconcile()
	m.mu.Unlock()

	<-ctx.Done()

	m.mu.Lock()
	m.state = stopped
	for port, l := range m.active {
		l.shutdown()
		delete(m.active, port)
	}
	if m.cfg.Metrics != nil {
		m.cfg.Metrics.SetLocalhostNodePortListeners(0)
	}
	m.mu.Unlock()
	// No goroutine is started once state is stopped, so Wait cannot race with Go.
	return m.group.Wait()
}

// Ports returns the NodePorts with a bound listener, sorted.
func (m *Manager) Ports() []uint16 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]uint16, 0, len(m.active))
	for p := range m.active {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// reconcile makes the listeners those of m.desired. m.mu is held, state running.
func (m *Manager) reconcile() {
	wanted := make(map[uint16]*Spec, len(m.desired))
	var order []uint16
	for i := range m.desired {
		s := &m.desired[i]
		if len(s.Endpoints) == 0 {
			continue
		}
		if prev, dup := wanted[s.NodePort]; dup {
			m.logger.V(2).Info("Two Services claim one localhost NodePort; serving the first", "port", s.NodePort,
				"service", prev.Name.String(), "ignored", s.Name.String())
			continue
		}
		wanted[s.NodePort] = s
		order = append(order, s.NodePort)
	}
	for port, l := range m.active {
		if _, ok := wanted[port]; !ok {
			m.logger.V(2).Info("Removing localhost nodeport proxy", "protocol", v1.ProtocolTCP, "port", port)
			l.shutdown()
			delete(m.active, port)
		}
	}
	for _, port := range order {
		spec := wanted[port]
		if l := m.active[port]; l != nil {
			l.update(spec)
			continue
		}
		l, err := m.listen(spec)
		if err != nil {
			m.logger.Error(err, "Failed to create localhost nodeport proxy", "protocol", v1.ProtocolTCP, "port", port, "service", spec.Name.String())
			if m.cfg.Metrics != nil {
				m.cfg.Metrics.IncLocalhostNodePortListenerFailures()
			}
			continue
		}
		m.active[port] = l
		m.group.Go(func() error { l.acceptLoop(m.group); return nil })
		m.logger.V(4).Info("Created localhost nodeport proxy", "protocol", v1.ProtocolTCP, "port", port, "endpoints", len(spec.Endpoints))
	}
	if m.cfg.Metrics != nil {
		m.cfg.Metrics.SetLocalhostNodePortListeners(len(m.active))
	}
}

func (m *Manager) listen(spec *Spec) (*listener, error) {
	addr := net.JoinHostPort(m.address.String(), strconv.Itoa(int(spec.NodePort)))
	ln, err := m.cfg.Listen(m.ctx, m.network, addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(m.ctx)
	l := &listener{m: m, port: spec.NodePort, ln: ln, ctx: ctx, cancel: cancel}
	l.update(spec)
	return l, nil
}

// listener is one bound NodePort.
type listener struct {
	m    *Manager
	port uint16
	ln   net.Listener
	// ctx is canceled when the listener is removed; its connections close then.
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	endpoints []netip.AddrPort
	affinity  time.Duration
	// pinned is the endpoint every connection goes to while affinity holds
	// (localhost traffic has a single source address), last used at pinnedAt.
	pinned   netip.AddrPort
	pinnedAt time.Time
}

func (l *listener) update(spec *Spec) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endpoints = spec.Endpoints
	if spec.AffinityTimeout != l.affinity {
		l.affinity = spec.AffinityTimeout
		l.pinned = netip.AddrPort{}
	}
}

func (l *listener) shutdown() {
	l.cancel()
	_ = l.ln.Close()
}

// pick returns the endpoint of a new connection: the pinned one while affinity
// holds and it is still an endpoint (renewing the pin), else one at random.
func (l *listener) pick() (netip.AddrPort, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.endpoints) == 0 {
		return netip.AddrPort{}, false
	}
	now := l.m.cfg.Clock.Now()
	if l.affinity > 0 && l.pinned.IsValid() && now.Sub(l.pinnedAt) <= l.affinity && slices.Contains(l.endpoints, l.pinned) {
		l.pinnedAt = now
		return l.pinned, true
	}
	ep := l.endpoints[l.m.cfg.IntN(len(l.endpoints))]
	if l.affinity > 0 {
		l.pinned, l.pinnedAt = ep, now
	}
	return ep, true
}

// acceptLoop serves connections until the listener is closed; each runs in g.
func (l *listener) acceptLoop(g *errgroup.Group) {
	logger := l.m.logger
	var delay time.Duration
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			if l.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off a little, as
			// net/http does, rather than spin.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			logger.V(4).Info("Accept error on localhost nodeport proxy", "err", err, "port", l.port, "retryIn", delay)
			select {
			case <-l.ctx.Done():
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		g.Go(func() error { l.serve(conn); return nil })
	}
}

// serve proxies one client connection to an endpoint.
func (l *listener) serve(client net.Conn) {
	defer client.Close() //nolint:errcheck // best effort
	logger := l.m.logger
	ep, ok := l.pick()
	if !ok {
		return
	}
	dialCtx, cancel := context.WithTimeout(l.ctx, DialTimeout)
	backend, err := l.m.cfg.Dial(dialCtx, "tcp", ep.String())
	cancel()
	if err != nil {
		logger.V(4).Info("Failed to connect to backend", "err", err, "port", l.port, "endpoint", ep.String())
		return
	}
	defer backend.Close() //nolint:errcheck // best effort

	// Closing both sides ends the copies when the listener goes away or either
	// direction fails.
	closeBoth := func() {
		_ = client.Close()
		_ = backend.Close()
	}
	stop := context.AfterFunc(l.ctx, closeBoth)
	defer stop()
	var pipes errgroup.Group
	pipe := func(dst, src net.Conn, direction string) {
		if _, err := io.Copy(dst, src); err != nil {
			if l.ctx.Err() == nil {
				logger.V(4).Info("Error proxying localhost nodeport connection", "err", err, "port", l.port, "direction", direction)
			}
			closeBoth()
			return
		}
		if hc, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = hc.CloseWrite()
		}
	}
	pipes.Go(func() error { pipe(backend, client, "client->backend"); return nil })
	pipes.Go(func() error { pipe(client, backend, "backend->client"); return nil })
	_ = pipes.Wait()
}
