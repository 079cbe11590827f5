package watch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
)

// RelistBackoff is the back-off of an Informer's reflector between two lists and
// watches that ended: 0.1 s doubling (with up to half again of jitter) to client-go's
// ceiling of 30 s, reset after two minutes without one (the reflector's own reset).
//
// Why not client-go's own (0.8 s doubling, with up to 100% jitter): a restarted
// API server ends every watch, and a watch resumed on it from the old resource
// version is refused as too old, so each return of the API server costs a relist
// after one step of this back-off, and steps less than two minutes apart compound.
// With client-go's, three restarts and an outage in a row (issue 16, scenario 2)
// waited up to 1.6, 3.2, 6.4 and 12.8 s for their relists (measured: 1.1, 1.1,
// 5.7, 11.3 s to program a change); with this one 0.15, 0.3, 0.6, 1.2 s. Failures
// that persist reach the same 30 s after nine steps (about 50 s), so a broken
// request (403, a bad selector) costs the server no more than it does upstream
// once it has lasted a minute. Unreachable servers do not step it at all: the
// client's transport holds those requests (reconnectTransport).
var RelistBackoff = wait.Backoff{
	Duration: 100 * time.Millisecond,
	Factor:   2,
	Jitter:   0.5,
	Steps:    math.MaxInt32,
	Cap:      30 * time.Second,
}

// Informer lists and watches one kind of object into a cache and calls its
// handlers with every change, in order, from one goroutine. It is client-go's
// Reflector feeding a RealFIFO whose deltas update an Indexer, as client-go's
// shared informer does, for one reason: the shared informer gives no way to set
// its reflector's back-off (client-go's ReflectorOptions.Backoff is not exposed
// through it), and the Informer uses RelistBackoff. It makes the same requests to
// the API server as the shared informer of the same ListerWatcher.
//
// Differences from the shared informer, none of which kproxy's handlers notice:
// handlers are called one after another on the Informer's goroutine (not each on
// its own); a handler added after the Informer has synced gets the cached objects
// as adds before AddEventHandlerWithResyncPeriod returns; a relist delivers only
// the objects whose resource version changed, and a resync (every resync period,
// to the handlers registered with a non-zero one) every object.
type Informer struct {
	name      string
	lw        cache.ListerWatcher
	objType   runtime.Object
	resync    time.Duration
	transform cache.TransformFunc
	backoff   wait.Backoff
	indexer   cache.Indexer

	// mu serialises handler calls and registrations.
	mu       sync.Mutex
	handlers []handler
	synced   chan struct{}
	started  bool
}

type handler struct {
	cache.ResourceEventHandler
	resync bool
}

// NewInformer returns an Informer of objType objects listed and watched by lw,
// converted by transform (nil: as they come), resynced every resync (0: never). It
// has no side effects: nothing talks to the API server before Run.
func NewInformer(name string, lw cache.ListerWatcher, objType runtime.Object, resync time.Duration, transform cache.TransformFunc) *Informer {
	return &Informer{
		name:      name,
		lw:        lw,
		objType:   objType,
		resync:    resync,
		transform: transform,
		backoff:   RelistBackoff,
		indexer:   cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{}),
		synced:    make(chan struct{}),
	}
}

// GetStore is the Informer's cache of objects (as transformed).
func (i *Informer) GetStore() cache.Store { return i.indexer }

// GetIndexer is the Informer's cache, for listers.
func (i *Informer) GetIndexer() cache.Indexer { return i.indexer }

// HasSyncedChecker is done once the first list has been delivered to the handlers.
func (i *Informer) HasSyncedChecker() cache.DoneChecker { return doneChecker{i.name, i.synced} }

// AddEventHandlerWithResyncPeriod registers h, which then sees every change in
// order; with resync > 0 it also gets every object as an update each resync
// period of the Informer. Added after the Informer has synced, h first gets the
// cached objects as adds, before this returns. The registration's checker is done
// once h has had the first list.
func (i *Informer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, obj := range i.indexer.List() {
		h.OnAdd(obj, true)
	}
	i.handlers = append(i.handlers, handler{ResourceEventHandler: h, resync: resync > 0})
	return registration{doneChecker{i.name, i.synced}}, nil
}

// Run lists and watches until ctx is done, then returns nil. Call it once.
func (i *Informer) Run(ctx context.Context) error {
	i.mu.Lock()
	if i.started {
		i.mu.Unlock()
		return fmt.Errorf("informer %s: Run called twice", i.name)
	}
	i.started = true
	i.mu.Unlock()

	fifo := cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{
		Name:         i.name,
		KeyFunction:  cache.MetaNamespaceKeyFunc,
		KnownObjects: i.indexer,
		Transformer:  i.transform,
	})
	reflector := cache.NewReflectorWithOptions(i.lw, i.objType, fifo, cache.ReflectorOptions{
		Name:            i.name,
		TypeDescription: fmt.Sprintf("%T", i.objType),
		ResyncPeriod:    i.resync,
		Backoff:         &i.backoff,
	})

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		reflector.RunWithContext(gctx)
		return nil
	})
	g.Go(func() error {
		select {
		case <-fifo.HasSyncedChecker().Done():
			close(i.synced)
		case <-gctx.Done():
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		fifo.Close()
		return nil
	})
	g.Go(func() error {
		for {
			if _, err := fifo.Pop(i.deliver); err != nil {
				if errors.Is(err, cache.ErrFIFOClosed) {
					return nil
				}
				return fmt.Errorf("informer %s: %w", i.name, err)
			}
		}
	})
	return g.Wait()
}

// deliver applies one popped item's deltas to the cache and tells the handlers.
func (i *Informer) deliver(item any, isInInitialList bool) error {
	deltas, ok := item.(cache.Deltas)
	if !ok {
		return fmt.Errorf("unexpected item %T in the queue", item)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, d := range deltas {
		switch d.Type {
		case cache.Sync, cache.Replaced, cache.Added, cache.Updated:
			old, exists, err := i.indexer.Get(d.Object)
			if err != nil || !exists {
				if err := i.indexer.Add(d.Object); err != nil {
					return err
				}
				for _, h := range i.handlers {
					h.OnAdd(d.Object, isInInitialList)
				}
				continue
			}
			if err := i.indexer.Update(d.Object); err != nil {
				return err
			}
			resync := d.Type == cache.Sync
			if !resync && sameVersion(old, d.Object) {
				continue // a relist's unchanged object
			}
			for _, h := range i.handlers {
				if !resync || h.resync {
					h.OnUpdate(old, d.Object)
				}
			}
		case cache.Deleted:
			if err := i.indexer.Delete(d.Object); err != nil {
				return err
			}
			for _, h := range i.handlers {
				h.OnDelete(d.Object)
			}
		}
	}
	return nil
}

func sameVersion(a, b any) bool {
	am, err := meta.Accessor(a)
	if err != nil {
		return false
	}
	bm, err := meta.Accessor(b)
	if err != nil {
		return false
	}
	return am.GetResourceVersion() != "" && am.GetResourceVersion() == bm.GetResourceVersion()
}

type doneChecker struct {
	name string
	done chan struct{}
}

func (c doneChecker) Name() string          { return c.name }
func (c doneChecker) Done() <-chan struct{} { return c.done }

type registration struct{ checker doneChecker }

func (r registration) HasSynced() bool {
	select {
	case <-r.checker.done:
		return true
	default:
		return false
	}
}

func (r registration) HasSyncedChecker() cache.DoneChecker { return r.checker }
