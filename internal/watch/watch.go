package watch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/model"
)

// Option configures a Watcher.
type Option func(*Watcher)

// WithNodeInformer makes the Watcher register its node handlers on an existing
// node Informer (the node manager's, NewNodeInformer) instead of creating one.
// The Watcher does not run it: its owner does.
func WithNodeInformer(informer *Informer) Option {
	return func(w *Watcher) { w.sharedNodeInformer = informer }
}

// Watcher runs the informers and fans their events out to the registered handlers.
type Watcher struct {
	client   kubernetes.Interface
	nodeName string
	resync   time.Duration

	sharedNodeInformer *Informer

	mu                   sync.Mutex
	started              bool
	serviceHandlers      []ServiceHandler
	endpointSliceHandler []EndpointSliceHandler
	nodeHandlers         []NodeHandler
	topologyHandlers     []NodeTopologyHandler
	serviceCIDRHandlers  []ServiceCIDRHandler

	synced chan struct{}
}

// New returns a Watcher for the node. resync is the informers' resync period
// (configSyncPeriod; 0 disables resyncs). It has no side effects: nothing talks to
// the API server before Run.
func New(client kubernetes.Interface, nodeName string, resync time.Duration, opts ...Option) *Watcher {
	w := &Watcher{
		client:   client,
		nodeName: nodeName,
		resync:   resync,
		synced:   make(chan struct{}),
	}
	for _, o := range opts {
		o(w)
	}
	return w
}

var errStarted = errors.New("watch: handlers must be registered before Run")

func (w *Watcher) register(add func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		// Registering late would silently miss the initial list: a programming error.
		utilruntime.HandleError(errStarted)
		return
	}
	add()
}

// AddServiceHandler registers h; call before Run.
func (w *Watcher) AddServiceHandler(h ServiceHandler) {
	w.register(func() { w.serviceHandlers = append(w.serviceHandlers, h) })
}

// AddEndpointSliceHandler registers h; call before Run.
func (w *Watcher) AddEndpointSliceHandler(h EndpointSliceHandler) {
	w.register(func() { w.endpointSliceHandler = append(w.endpointSliceHandler, h) })
}

// AddNodeHandler registers h; call before Run.
func (w *Watcher) AddNodeHandler(h NodeHandler) {
	w.register(func() { w.nodeHandlers = append(w.nodeHandlers, h) })
}

// AddNodeTopologyHandler registers h; call before Run.
func (w *Watcher) AddNodeTopologyHandler(h NodeTopologyHandler) {
	w.register(func() { w.topologyHandlers = append(w.topologyHandlers, h) })
}

// AddServiceCIDRHandler registers h; call before Run.
func (w *Watcher) AddServiceCIDRHandler(h ServiceCIDRHandler) {
	w.register(func() { w.serviceCIDRHandlers = append(w.serviceCIDRHandlers, h) })
}

// Synced is closed once every started informer has synced and the *Synced
// handlers have been called.
func (w *Watcher) Synced() <-chan struct{} { return w.synced }

// Run starts the informers of the kinds that have handlers, waits for them to sync
// and calls the *Synced handlers, then blocks until ctx is done and stops the
// informers. It returns an error if ctx ends before the caches sync, and nil after a
// normal shutdown.
func (w *Watcher) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return errors.New("watch: Run called twice")
	}
	w.started = true
	w.mu.Unlock()

	logger := klog.FromContext(ctx)
	// The informers this Watcher runs (not a shared node informer: its owner does).
	var informers []*Informer
	trimmer := NewTrimmer(w.nodeName)
	own := func(i *Informer) *Informer {
		informers = append(informers, i)
		return i
	}

	// waits are run after the informers start; each calls its kind's synced hook.
	var waits []func(context.Context) error
	// The registrations' DoneCheckers close a channel when the initial list has been
	// delivered: waiting on it reacts at once, where WaitForCacheSync polls every
	// 100 ms (a delay straight onto the first sync).
	addWait := func(name string, synced cache.DoneChecker, onSynced func()) {
		waits = append(waits, func(ctx context.Context) error {
			logger.Info("Waiting for caches to sync", "controller", name)
			if !cache.WaitFor(ctx, "", synced) {
				return fmt.Errorf("waiting for %s caches to sync: %w", name, context.Cause(ctx))
			}
			logger.Info("Caches are synced", "controller", name)
			onSynced()
			return nil
		})
	}

	if len(w.serviceHandlers) > 0 {
		informer := own(newServiceInformer(w.client, w.resync, trimmer.TrimForProxy))
		reg, err := informer.AddEventHandlerWithResyncPeriod(w.serviceEvents(logger), w.resync)
		if err != nil {
			return fmt.Errorf("registering service handlers: %w", err)
		}
		logger.Info("Starting service config controller")
		addWait("service config", reg.HasSyncedChecker(), func() {
			for _, h := range w.serviceHandlers {
				logger.V(3).Info("Calling handler.OnServiceSynced()")
				h.OnServiceSynced()
			}
		})
	}

	if len(w.endpointSliceHandler) > 0 {
		informer := own(newEndpointSliceInformer(w.client, w.resync, trimmer.TrimForProxy))
		reg, err := informer.AddEventHandlerWithResyncPeriod(w.endpointSliceEvents(logger), w.resync)
		if err != nil {
			return fmt.Errorf("registering endpoint slice handlers: %w", err)
		}
		logger.Info("Starting endpoint slice config controller")
		addWait("endpoint slice config", reg.HasSyncedChecker(), func() {
			for _, h := range w.endpointSliceHandler {
				logger.V(3).Info("Calling handler.OnEndpointSlicesSynced()")
				h.OnEndpointSlicesSynced()
			}
		})
	}

	if len(w.serviceCIDRHandlers) > 0 {
		informer := own(newServiceCIDRInformer(w.client, w.resync, trimmer.TrimForProxy))
		cidrs := &serviceCIDRs{store: informer.GetStore(), handlers: w.serviceCIDRHandlers, logger: logger}
		reg, err := informer.AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { cidrs.notify() },
			UpdateFunc: func(_, _ any) { cidrs.notify() },
			DeleteFunc: func(any) { cidrs.notify() },
		}, w.resync)
		if err != nil {
			return fmt.Errorf("registering service CIDR handlers: %w", err)
		}
		logger.Info("Starting serviceCIDR config controller")
		addWait("serviceCIDR config", reg.HasSyncedChecker(), cidrs.notify)
	}

	if len(w.nodeHandlers) > 0 || len(w.topologyHandlers) > 0 {
		informer := w.sharedNodeInformer
		if informer == nil {
			informer = own(NewNodeInformer(w.client, w.nodeName, w.resync, trimmer.TrimForProxy))
		}
		if len(w.nodeHandlers) > 0 {
			reg, err := informer.AddEventHandlerWithResyncPeriod(w.nodeEvents(logger), w.resync)
			if err != nil {
				return fmt.Errorf("registering node handlers: %w", err)
			}
			logger.Info("Starting node config controller")
			addWait("node config", reg.HasSyncedChecker(), func() {
				for _, h := range w.nodeHandlers {
					logger.V(3).Info("Calling handler.OnNodeSynced()")
					h.OnNodeSynced()
				}
			})
		}
		if len(w.topologyHandlers) > 0 {
			topo := &topology{handlers: w.topologyHandlers, logger: logger}
			reg, err := informer.AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
				AddFunc:    topo.onNode,
				UpdateFunc: func(_, obj any) { topo.onNode(obj) },
			}, w.resync)
			if err != nil {
				return fmt.Errorf("registering node topology handlers: %w", err)
			}
			// Synced also means the Node's topology labels were delivered, so the
			// first sync sees them (the 100 ms poll used to hide this race).
			addWait("node topology", reg.HasSyncedChecker(), func() {})
		}
	}

	// The informers run until ctx is done or one of them fails; the caches' waits
	// fail with them.
	g, gctx := errgroup.WithContext(ctx)
	for _, i := range informers {
		g.Go(func() error { return i.Run(gctx) })
	}
	g.Go(func() error {
		errs := make(chan error, len(waits))
		for _, wait := range waits {
			go func() { errs <- wait(gctx) }()
		}
		var syncErr error
		for range waits {
			if err := <-errs; err != nil && syncErr == nil {
				syncErr = err
			}
		}
		if syncErr != nil {
			return syncErr
		}
		close(w.synced)
		<-gctx.Done()
		return nil
	})
	return g.Wait()
}

func (w *Watcher) serviceEvents(logger klog.Logger) cache.ResourceEventHandler {
	return typedEvents(logger, "service",
		func(svc *v1.Service) {
			for _, h := range w.serviceHandlers {
				h.OnServiceAdd(svc)
			}
		},
		func(old, svc *v1.Service) {
			for _, h := range w.serviceHandlers {
				h.OnServiceUpdate(old, svc)
			}
		},
		func(svc *v1.Service) {
			for _, h := range w.serviceHandlers {
				h.OnServiceDelete(svc)
			}
		})
}

func (w *Watcher) endpointSliceEvents(logger klog.Logger) cache.ResourceEventHandler {
	return typedEvents(logger, "endpoints",
		func(slice *model.EndpointSlice) {
			for _, h := range w.endpointSliceHandler {
				h.OnEndpointSliceAdd(slice)
			}
		},
		func(old, slice *model.EndpointSlice) {
			for _, h := range w.endpointSliceHandler {
				h.OnEndpointSliceUpdate(old, slice)
			}
		},
		func(slice *model.EndpointSlice) {
			for _, h := range w.endpointSliceHandler {
				h.OnEndpointSliceDelete(slice)
			}
		})
}

// typedEvents adapts an informer's untyped callbacks to typed ones: objects of an
// unexpected type are reported and dropped, and deletions seen only as tombstones are
// unwrapped.
func typedEvents[T interface {
	*v1.Service | *model.EndpointSlice
	metav1.Object
}](logger klog.Logger, kind string, onAdd func(T), onUpdate func(old, obj T), onDelete func(T)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			o, ok := obj.(T)
			if !ok {
				utilruntime.HandleError(fmt.Errorf("unexpected object type: %T", obj))
				return
			}
			logger.V(4).Info("Add event", kind, klog.KObj(o))
			onAdd(o)
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(T)
			o, ok2 := newObj.(T)
			if !ok1 || !ok2 {
				utilruntime.HandleError(fmt.Errorf("unexpected object types: %T, %T", oldObj, newObj))
				return
			}
			logger.V(4).Info("Update event", kind, klog.KObj(o))
			onUpdate(old, o)
		},
		DeleteFunc: func(obj any) {
			o, ok := deletedObject[T](obj)
			if !ok {
				return
			}
			logger.V(4).Info("Delete event", kind, klog.KObj(o))
			onDelete(o)
		},
	}
}

func (w *Watcher) nodeEvents(logger klog.Logger) cache.ResourceEventHandler {
	change := func(obj any) {
		node, ok := obj.(*v1.Node)
		if !ok {
			utilruntime.HandleError(fmt.Errorf("unexpected object type: %T", obj))
			return
		}
		for _, h := range w.nodeHandlers {
			logger.V(4).Info("Calling handler.OnNodeChange", "node", klog.KObj(node))
			h.OnNodeChange(node)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    change,
		UpdateFunc: func(_, obj any) { change(obj) },
		DeleteFunc: func(obj any) {
			node, ok := deletedObject[*v1.Node](obj)
			if !ok {
				return
			}
			for _, h := range w.nodeHandlers {
				logger.V(4).Info("Calling handler.OnNodeDelete", "node", klog.KObj(node))
				h.OnNodeDelete(node)
			}
		},
	}
}

// deletedObject unwraps the object of a delete event, which is a tombstone
// (cache.DeletedFinalStateUnknown) when the watch missed the deletion.
func deletedObject[T any](obj any) (T, bool) {
	if t, ok := obj.(T); ok {
		return t, true
	}
	var zero T
	tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("unexpected object type: %T", obj))
		return zero, false
	}
	t, ok := tombstone.Obj.(T)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("unexpected tombstone object type: %T", tombstone.Obj))
		return zero, false
	}
	return t, true
}

// serviceCIDRs recomputes the set of CIDRs from the informer's store on every
// event, so a CIDR shared by two ServiceCIDR objects survives the deletion of one.
type serviceCIDRs struct {
	mu       sync.Mutex
	store    cache.Store
	handlers []ServiceCIDRHandler
	logger   klog.Logger
}

func (s *serviceCIDRs) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := sets.New[string]()
	for _, obj := range s.store.List() {
		if sc, ok := obj.(*networkingv1.ServiceCIDR); ok {
			set.Insert(sc.Spec.CIDRs...)
		}
	}
	cidrs := sets.List(set)
	for _, h := range s.handlers {
		s.logger.V(4).Info("Calling handler.OnServiceCIDRsChanged", "cidrs", cidrs)
		h.OnServiceCIDRsChanged(slices.Clone(cidrs))
	}
}

// topology reports the proxy-relevant node labels when they change.
type topology struct {
	mu       sync.Mutex
	labels   map[string]string
	handlers []NodeTopologyHandler
	logger   klog.Logger
}

// topologyLabelKeys are the node labels routing decisions depend on.
var topologyLabelKeys = []string{v1.LabelTopologyZone}

func (t *topology) onNode(obj any) {
	node, ok := obj.(*v1.Node)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("unexpected object type: %T", obj))
		return
	}
	labels := map[string]string{}
	for _, k := range topologyLabelKeys {
		if v, ok := node.Labels[k]; ok {
			labels[k] = v
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if maps.Equal(t.labels, labels) {
		return
	}
	t.labels = labels
	for _, h := range t.handlers {
		t.logger.V(4).Info("Calling handler.OnTopologyChange", "labels", labels)
		h.OnTopologyChange(maps.Clone(labels))
	}
}
