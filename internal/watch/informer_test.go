package watch

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// scriptedLW lists what the test set last and hands every watch to the test.
type scriptedLW struct {
	mu       sync.Mutex
	list     *v1.ServiceList
	lists    int
	watchers chan *watch.FakeWatcher
}

func newScriptedLW(rv string, svcs ...*v1.Service) *scriptedLW {
	lw := &scriptedLW{watchers: make(chan *watch.FakeWatcher, 10)}
	lw.setList(rv, svcs...)
	return lw
}

func (s *scriptedLW) setList(rv string, svcs ...*v1.Service) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := &v1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}
	for _, svc := range svcs {
		list.Items = append(list.Items, *svc)
	}
	s.list = list
}

// listOnly says the scripted client has no streaming lists (WatchList), so the
// reflector lists, as with client-go's fake clients.
type listOnly struct{}

func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

func (s *scriptedLW) listerWatcher() cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.lists++
			return s.list.DeepCopy(), nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			w := watch.NewFake()
			s.watchers <- w
			return w, nil
		},
	}, listOnly{})
}

func (s *scriptedLW) nextWatch(t *testing.T) *watch.FakeWatcher {
	t.Helper()
	select {
	case w := <-s.watchers:
		return w
	case <-time.After(10 * time.Second):
		t.Fatal("waited 10 s for the informer's watch")
		return nil
	}
}

func svc(name, rv string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

// eventLog records a handler's calls as text.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf(format, args...))
}

func (l *eventLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

func name(obj any) string {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Key + " (final state unknown)"
	}
	s := obj.(*v1.Service)
	return s.Name + "@" + s.ResourceVersion
}

func (l *eventLog) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { l.add("add %s initial=%t", name(obj), initial) },
		UpdateFunc: func(old, obj any) { l.add("update %s -> %s", name(old), name(obj)) },
		DeleteFunc: func(obj any) { l.add("delete %s", name(obj)) },
	}
}

// await waits (bounded) until the log ends with last.
func (l *eventLog) await(t *testing.T, last string) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := l.snapshot()
		if len(got) > 0 && got[len(got)-1] == last {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for event %q; events %q", last, got)
		}
		time.Sleep(time.Millisecond)
	}
}

func runInformer(t *testing.T, i *Informer) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- i.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func awaitSynced(t *testing.T, i *Informer) {
	t.Helper()
	select {
	case <-i.HasSyncedChecker().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("waited 10 s for the informer to sync")
	}
}

// TestInformerEvents: the first list, then the watch's changes, in order; a relist
// after the watch expired (as on a restarted API server) delivers what changed
// and deletes what went, and not the unchanged objects; a handler added later
// gets the cache as adds.
func TestInformerEvents(t *testing.T) {
	lw := newScriptedLW("1", svc("a", "1"), svc("b", "1"), svc("c", "1"))
	informer := NewInformer("service", lw.listerWatcher(), &v1.Service{}, 0, nil)
	var log eventLog
	if _, err := informer.AddEventHandlerWithResyncPeriod(log.handler(), 0); err != nil {
		t.Fatal(err)
	}
	runInformer(t, informer)
	awaitSynced(t, informer)
	w := lw.nextWatch(t)
	w.Add(svc("d", "2"))
	w.Modify(svc("a", "3"))
	got := log.await(t, "update a@1 -> a@3")
	want := []string{
		"add a@1 initial=true", "add b@1 initial=true", "add c@1 initial=true",
		"add d@2 initial=false", "update a@1 -> a@3",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}

	// The API server restarted: the resumed watch is refused as too old.
	lw.setList("5", svc("a", "3"), svc("b", "4"), svc("d", "2"))
	w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})
	w = lw.nextWatch(t)
	w.Add(svc("e", "6")) // a marker: every delta of the relist came before it
	got = log.await(t, "add e@6 initial=false")
	// The FIFO puts a relist's deletions first.
	want = append(want, "delete ns/c (final state unknown)", "update b@1 -> b@4", "add e@6 initial=false")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events after the relist (-want +got):\n%s", diff)
	}

	var late eventLog
	reg, err := informer.AddEventHandlerWithResyncPeriod(late.handler(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reg.HasSynced() {
		t.Error("a handler added after the sync is not synced")
	}
	gotLate := late.snapshot()
	slices.Sort(gotLate)
	wantLate := []string{"add a@3 initial=true", "add b@4 initial=true", "add d@2 initial=true", "add e@6 initial=true"}
	if diff := cmp.Diff(wantLate, gotLate); diff != "" {
		t.Errorf("late handler's events (-want +got):\n%s", diff)
	}
}

// TestInformerRelistsSoon: a watch ended by the API server is followed by a
// relist after RelistBackoff's first step, not client-go's 0.8 s or more.
func TestInformerRelistsSoon(t *testing.T) {
	lw := newScriptedLW("1", svc("a", "1"))
	informer := NewInformer("service", lw.listerWatcher(), &v1.Service{}, 0, nil)
	runInformer(t, informer)
	awaitSynced(t, informer)
	// Three relists in a row: client-go's back-off would wait at least 0.8, 1.6 and
	// 3.2 s; RelistBackoff at most 0.15, 0.3 and 0.6 s.
	start := time.Now()
	for range 3 {
		lw.nextWatch(t).Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired})
	}
	lw.nextWatch(t)
	if d := time.Since(start); d >= 5600*time.Millisecond {
		t.Errorf("three relists took %s: client-go's back-off, not RelistBackoff", d)
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.lists != 4 {
		t.Errorf("%d lists, want 4", lw.lists)
	}
}

// TestInformerResync: every resync period the handlers registered with one get
// every object as an update; the others do not.
func TestInformerResync(t *testing.T) {
	lw := newScriptedLW("1", svc("a", "1"))
	informer := NewInformer("service", lw.listerWatcher(), &v1.Service{}, 20*time.Millisecond, nil)
	var resynced, quiet eventLog
	for h, period := range map[*eventLog]time.Duration{&resynced: 20 * time.Millisecond, &quiet: 0} {
		if _, err := informer.AddEventHandlerWithResyncPeriod(h.handler(), period); err != nil {
			t.Fatal(err)
		}
	}
	runInformer(t, informer)
	awaitSynced(t, informer)
	deadline := time.Now().Add(10 * time.Second)
	for len(resynced.snapshot()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for two resyncs; events %q", resynced.snapshot())
		}
		time.Sleep(time.Millisecond)
	}
	if got := resynced.snapshot()[1]; got != "update a@1 -> a@1" {
		t.Errorf("resync event %q", got)
	}
	if got := quiet.snapshot(); !slices.Equal(got, []string{"add a@1 initial=true"}) {
		t.Errorf("a handler without a resync period got %q", got)
	}
}
