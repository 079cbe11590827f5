package node

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/watch"
)

// Errors Run returns when the node changed in a way that needs a restart.
var (
	ErrNodeIPsChanged  = errors.New("node IPs changed")
	ErrPodCIDRsChanged = errors.New("node podCIDRs changed")
	ErrNodeDeleted     = errors.New("node deleted")
)

// Config configures a Manager.
type Config struct {
	NodeName string
	// ResyncPeriod is the informer's resync period (configSyncPeriod).
	ResyncPeriod time.Duration
	// WatchPodCIDRs is set in NodeCIDR local-traffic detection mode: Start then
	// waits for podCIDRs, and Run stops when they change.
	WatchPodCIDRs bool

	// PollInterval (default 1s), NodeIPsTimeout (default 30s) and
	// PodCIDRsTimeout (default 5m) bound Start's waits, as in kube-proxy.
	PollInterval    time.Duration
	NodeIPsTimeout  time.Duration
	PodCIDRsTimeout time.Duration
}

func (c *Config) defaults() {
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.NodeIPsTimeout <= 0 {
		c.NodeIPsTimeout = 30 * time.Second
	}
	if c.PodCIDRsTimeout <= 0 {
		c.PodCIDRsTimeout = 5 * time.Minute
	}
}

// Manager watches this node's Node object.
type Manager struct {
	cfg      Config
	informer *watch.Informer
	// informerDone receives the informer's Run result once it has stopped.
	informerDone chan error

	// Constant after Start.
	nodeIPs  []netip.Addr
	podCIDRs []string

	mu      sync.Mutex
	started bool
	node    *v1.Node

	changed chan error
}

// NewManager returns a Manager for cfg.NodeName. It has no side effects.
func NewManager(client kubernetes.Interface, cfg Config) *Manager {
	cfg.defaults()
	return &Manager{
		cfg:          cfg,
		informer:     watch.NewNodeInformer(client, cfg.NodeName, cfg.ResyncPeriod, watch.StripManagedFields),
		informerDone: make(chan error, 1),
		changed:      make(chan error, 1),
	}
}

// NodeInformer is the single-node informer, for watch.WithNodeInformer.
func (m *Manager) NodeInformer() *watch.Informer { return m.informer }

// Start starts the informer, which then runs until ctx is done, and waits for the
// Node object to exist and have addresses (at most NodeIPsTimeout), then, when
// podCIDRs are watched, for podCIDRs (at most PodCIDRsTimeout more).
//
// As in kube-proxy, a node that does not appear or has no addresses is only logged
// (the proxy then runs with loopback node IPs, see DetectNodeIPs) unless podCIDRs
// are watched, in which case missing podCIDRs are an error.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return errors.New("node manager: Start called twice")
	}
	m.started = true
	m.mu.Unlock()

	logger := klog.FromContext(ctx)
	go func() { m.informerDone <- m.informer.Run(ctx) }()
	lister := corelisters.NewNodeLister(m.informer.GetIndexer())
	// The informer's DoneChecker closes a channel once the Node is listed: no
	// 100 ms poll (WaitForCacheSync) on the way to the first sync.
	logger.Info("Waiting for caches to sync", "controller", "node manager")
	if !cache.WaitFor(ctx, "", m.informer.HasSyncedChecker()) {
		return fmt.Errorf("can not sync node informer: %w", context.Cause(ctx))
	}

	var node *v1.Node
	var nodeIPs []netip.Addr
	var podCIDRs []string
	poll := func() {
		node, _ = lister.Get(m.cfg.NodeName)
		nodeIPs = NodeHostIPs(node)
		podCIDRs = nil
		if node != nil {
			podCIDRs = node.Spec.PodCIDRs
		}
	}
	waitFor := func(timeout time.Duration, done func() bool) {
		waitCtx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		_ = wait.PollUntilContextCancel(waitCtx, m.cfg.PollInterval, false, func(context.Context) (bool, error) {
			poll()
			return done(), nil
		})
	}

	poll()
	if len(nodeIPs) == 0 {
		waitFor(m.cfg.NodeIPsTimeout, func() bool { return len(nodeIPs) != 0 })
	}
	if m.cfg.WatchPodCIDRs && len(podCIDRs) == 0 {
		waitFor(m.cfg.PodCIDRsTimeout, func() bool { return len(podCIDRs) != 0 })
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("waiting for node %q: %w", m.cfg.NodeName, context.Cause(ctx))
	}
	if m.cfg.WatchPodCIDRs && len(podCIDRs) == 0 {
		if node == nil {
			return fmt.Errorf("timeout waiting for node %q to exist", m.cfg.NodeName)
		}
		return fmt.Errorf("timeout waiting for PodCIDR allocation on node %q", m.cfg.NodeName)
	}

	switch {
	case node == nil:
		logger.Error(nil, "Timed out waiting for node to exist", "node", klog.KRef("", m.cfg.NodeName))
	case len(nodeIPs) == 0:
		logger.Error(nil, "Timed out waiting for node to be assigned IPs", "node", klog.KRef("", m.cfg.NodeName))
	default:
		logger.Info("Successfully retrieved NodeIPs", "NodeIPs", nodeIPs)
	}

	m.mu.Lock()
	m.node = node
	m.mu.Unlock()
	m.nodeIPs = nodeIPs
	m.podCIDRs = slices.Clone(podCIDRs)

	// Registered only now, so that the replayed add of the current object is
	// compared with the values just captured; a change in between is caught.
	if _, err := m.informer.AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.onNodeChange(ctx, obj) },
		UpdateFunc: func(_, obj any) { m.onNodeChange(ctx, obj) },
		DeleteFunc: func(obj any) { m.onNodeDelete(ctx, obj) },
	}, m.cfg.ResyncPeriod); err != nil {
		return fmt.Errorf("watching node %q: %w", m.cfg.NodeName, err)
	}
	return nil
}

// Run blocks until ctx is done (returning nil) or the node changed in a way that
// needs a restart, returning an error wrapping ErrNodeIPsChanged,
// ErrPodCIDRsChanged or ErrNodeDeleted. Call it after Start.
func (m *Manager) Run(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-m.changed:
		return err
	case err := <-m.informerDone:
		if err != nil {
			return fmt.Errorf("node informer: %w", err)
		}
		return nil
	}
}

// NodeIPs returns the node's IPs found by Start (NodeHostIPs order), possibly
// empty.
func (m *Manager) NodeIPs() []netip.Addr { return slices.Clone(m.nodeIPs) }

// PodCIDRs returns the node's podCIDRs found by Start, possibly empty.
func (m *Manager) PodCIDRs() []string { return slices.Clone(m.podCIDRs) }

// Node returns a copy of the latest Node object, or nil if it was never seen.
func (m *Manager) Node() *v1.Node {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.node == nil {
		return nil
	}
	return m.node.DeepCopy()
}

func (m *Manager) report(err error) {
	select {
	case m.changed <- err:
	default: // a restart is already pending
	}
}

func (m *Manager) onNodeChange(ctx context.Context, obj any) {
	node, ok := obj.(*v1.Node)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("unexpected object type: %T", obj))
		return
	}
	logger := klog.FromContext(ctx)
	m.mu.Lock()
	m.node = node
	m.mu.Unlock()

	if m.cfg.WatchPodCIDRs && !slices.Equal(m.podCIDRs, node.Spec.PodCIDRs) {
		logger.Info("PodCIDRs changed for the node",
			"node", klog.KObj(node), "newPodCIDRs", node.Spec.PodCIDRs, "oldPodCIDRs", m.podCIDRs)
		m.report(fmt.Errorf("%w on node %q: %v -> %v", ErrPodCIDRsChanged, node.Name, m.podCIDRs, node.Spec.PodCIDRs))
		return
	}
	if nodeIPs := NodeHostIPs(node); !slices.Equal(m.nodeIPs, nodeIPs) {
		logger.Info("NodeIPs changed for the node",
			"node", klog.KObj(node), "newNodeIPs", nodeIPs, "oldNodeIPs", m.nodeIPs)
		m.report(fmt.Errorf("%w on node %q: %v -> %v", ErrNodeIPsChanged, node.Name, m.nodeIPs, nodeIPs))
	}
}

func (m *Manager) onNodeDelete(ctx context.Context, obj any) {
	node, ok := obj.(*v1.Node)
	if !ok {
		tombstone, isTombstone := obj.(cache.DeletedFinalStateUnknown)
		if !isTombstone {
			utilruntime.HandleError(fmt.Errorf("unexpected object type: %T", obj))
			return
		}
		if node, ok = tombstone.Obj.(*v1.Node); !ok {
			utilruntime.HandleError(fmt.Errorf("unexpected tombstone object type: %T", tombstone.Obj))
			return
		}
	}
	klog.FromContext(ctx).Info("Node is being deleted", "node", klog.KObj(node))
	m.report(fmt.Errorf("%w: %q", ErrNodeDeleted, node.Name))
}
