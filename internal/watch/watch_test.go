package watch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	watchapi "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/model"
)

// recorder implements every handler interface and logs the calls.
type recorder struct {
	name   string
	mu     sync.Mutex
	events []string
	// managedFieldsSeen counts objects delivered with managedFields.
	managedFieldsSeen int
}

func (r *recorder) add(obj metav1.Object, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if obj != nil && len(obj.GetManagedFields()) > 0 {
		r.managedFieldsSeen++
	}
	r.events = append(r.events, fmt.Sprintf(format, args...))
}

func (r *recorder) has(event string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.events, event)
}

func (r *recorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func (r *recorder) OnServiceAdd(s *v1.Service) { r.add(s, "service add %s", s.Name) }
func (r *recorder) OnServiceUpdate(o, s *v1.Service) {
	r.add(s, "service update %s %s->%s", s.Name, o.Spec.ClusterIP, s.Spec.ClusterIP)
}
func (r *recorder) OnServiceDelete(s *v1.Service) { r.add(s, "service delete %s", s.Name) }
func (r *recorder) OnServiceSynced()              { r.add(nil, "service synced") }
func (r *recorder) OnEndpointSliceAdd(s *model.EndpointSlice) {
	r.add(s, "slice add %s", s.Name)
}
func (r *recorder) OnEndpointSliceUpdate(_, s *model.EndpointSlice) {
	r.add(s, "slice update %s", s.Name)
}
func (r *recorder) OnEndpointSliceDelete(s *model.EndpointSlice) {
	r.add(s, "slice delete %s", s.Name)
}
func (r *recorder) OnEndpointSlicesSynced() { r.add(nil, "slice synced") }
func (r *recorder) OnNodeChange(n *v1.Node) { r.add(n, "node change %s", n.Name) }
func (r *recorder) OnNodeDelete(n *v1.Node) { r.add(n, "node delete %s", n.Name) }
func (r *recorder) OnNodeSynced()           { r.add(nil, "node synced") }
func (r *recorder) OnServiceCIDRsChanged(c []string) {
	r.add(nil, "cidrs %v", c)
}
func (r *recorder) OnTopologyChange(l map[string]string) {
	r.add(nil, "topology %v", l)
}

var managedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}

func service(name, clusterIP string, labels map[string]string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels, ManagedFields: managedFields},
		Spec:       v1.ServiceSpec{ClusterIP: clusterIP},
	}
}

func slice(name string, labels map[string]string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels, ManagedFields: managedFields},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
}

func serviceCIDR(name string, cidrs ...string) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
}

func node(name, zone string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ManagedFields: managedFields}}
	if zone != "" {
		n.Labels = map[string]string{v1.LabelTopologyZone: zone}
	}
	return n
}

// eventually waits, with a bound, for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// trackWatches makes a fake clientset report which resources have a watch: unlike an
// API server, the fake does not replay changes made before a watch exists, and Run
// signals Synced as soon as the lists are in, possibly before the watches start. It
// returns a function that waits until every resource the watcher informs on is
// watched.
func trackWatches(t *testing.T, w *Watcher) (waitWatched func()) {
	fc, ok := w.client.(*fake.Clientset)
	if !ok {
		return func() {}
	}
	var mu sync.Mutex
	watched := map[string]bool{}
	fc.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watchapi.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		wi, err := fc.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		mu.Lock()
		watched[action.GetResource().Resource] = true
		mu.Unlock()
		return true, wi, nil
	})
	return func() {
		t.Helper()
		var want []string
		if len(w.serviceHandlers) > 0 {
			want = append(want, "services")
		}
		if len(w.endpointSliceHandler) > 0 {
			want = append(want, "endpointslices")
		}
		if len(w.serviceCIDRHandlers) > 0 {
			want = append(want, "servicecidrs")
		}
		if w.sharedNodeInformer == nil && (len(w.nodeHandlers) > 0 || len(w.topologyHandlers) > 0) {
			want = append(want, "nodes")
		}
		eventually(t, fmt.Sprintf("watches of %v", want), func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range want {
				if !watched[r] {
					return false
				}
			}
			return true
		})
	}
}

func startWatcher(t *testing.T, w *Watcher) (stop func()) {
	t.Helper()
	waitWatched := trackWatches(t, w)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-w.Synced():
	case err := <-done:
		t.Fatalf("Run returned before sync: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for sync")
	}
	waitWatched()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v after cancel", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("Run did not return after cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func TestWatcherSelectorsAndFanOut(t *testing.T) {
	client := fake.NewClientset(
		service("web", "10.96.0.10", nil),
		service("other-proxy", "10.96.0.11", map[string]string{LabelServiceProxyName: "other"}),
		slice("web-abc", map[string]string{discoveryv1.LabelServiceName: "web"}),
		slice("headless-abc", map[string]string{v1.IsHeadlessService: ""}),
		serviceCIDR("kubernetes", "10.96.0.0/16", "fd00:10:96::/112"),
		node("node1", "zone-a"),
	)
	w := New(client, "node1", 0)
	a, b := &recorder{name: "a"}, &recorder{name: "b"}
	for _, r := range []*recorder{a, b} {
		w.AddServiceHandler(r)
		w.AddEndpointSliceHandler(r)
		w.AddNodeHandler(r)
		w.AddNodeTopologyHandler(r)
		w.AddServiceCIDRHandler(r)
	}
	startWatcher(t, w)

	for _, r := range []*recorder{a, b} {
		got := r.snapshot()
		for _, want := range []string{
			"service add web", "service synced", "slice add web-abc", "slice synced",
			"node change node1", "node synced", "topology map[topology.kubernetes.io/zone:zone-a]",
			"cidrs [10.96.0.0/16 fd00:10:96::/112]",
		} {
			if !slices.Contains(got, want) {
				t.Errorf("handler %s: missing %q in %q", r.name, want, got)
			}
		}
		for _, unwanted := range []string{"service add other-proxy", "slice add headless-abc"} {
			if slices.Contains(got, unwanted) {
				t.Errorf("handler %s: unexpected %q", r.name, unwanted)
			}
		}
		// Adds come before the synced call.
		if slices.Index(got, "service add web") > slices.Index(got, "service synced") {
			t.Errorf("handler %s: synced before add: %q", r.name, got)
		}
		if r.managedFieldsSeen != 0 {
			t.Errorf("handler %s: %d objects delivered with managedFields", r.name, r.managedFieldsSeen)
		}
	}

	// The selectors sent to the API server (the fake ignores field selectors, so
	// check the requests themselves).
	want := map[string]string{
		"services":       "labels=!service.kubernetes.io/service-proxy-name fields=spec.clusterIP!=None",
		"endpointslices": "labels=!service.kubernetes.io/headless fields=",
		"servicecidrs":   "labels= fields=",
		"nodes":          "labels= fields=metadata.name=node1",
	}
	got := map[string]string{}
	for _, action := range client.Actions() {
		if action.GetVerb() != "list" && action.GetVerb() != "watch" {
			continue
		}
		var s string
		switch a := action.(type) {
		case k8stesting.ListActionImpl:
			s = fmt.Sprintf("labels=%s fields=%s", a.ListRestrictions.Labels, a.ListRestrictions.Fields)
		case k8stesting.WatchActionImpl:
			s = fmt.Sprintf("labels=%s fields=%s", a.WatchRestrictions.Labels, a.WatchRestrictions.Fields)
		}
		res := action.GetResource().Resource
		if prev, ok := got[res]; ok && prev != s {
			t.Errorf("%s: list and watch selectors differ: %q vs %q", res, prev, s)
		}
		got[res] = s
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("selectors (-want +got):\n%s", diff)
	}
}

func TestWatcherUpdatesAndDeletes(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(service("web", "10.96.0.10", nil), slice("web-abc", nil), node("node1", ""))
	w := New(client, "node1", 0)
	r := &recorder{}
	w.AddServiceHandler(r)
	w.AddEndpointSliceHandler(r)
	w.AddNodeHandler(r)
	startWatcher(t, w)

	svc := service("web", "10.96.0.20", nil)
	if _, err := client.CoreV1().Services("ns").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "service update", func() bool { return r.has("service update web 10.96.0.10->10.96.0.20") })
	if err := client.CoreV1().Services("ns").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "service delete", func() bool { return r.has("service delete web") })

	if _, err := client.DiscoveryV1().EndpointSlices("ns").Create(ctx, slice("web-def", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "slice add", func() bool { return r.has("slice add web-def") })
	if err := client.DiscoveryV1().EndpointSlices("ns").Delete(ctx, "web-abc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "slice delete", func() bool { return r.has("slice delete web-abc") })

	if err := client.CoreV1().Nodes().Delete(ctx, "node1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node delete", func() bool { return r.has("node delete node1") })
	if r.managedFieldsSeen != 0 {
		t.Errorf("%d objects delivered with managedFields", r.managedFieldsSeen)
	}
}

func TestTombstones(t *testing.T) {
	w := New(fake.NewClientset(), "node1", 0)
	r := &recorder{}
	w.serviceHandlers = []ServiceHandler{r}
	w.endpointSliceHandler = []EndpointSliceHandler{r}
	w.nodeHandlers = []NodeHandler{r}
	logger := klog.Background()

	tomb := func(obj runtime.Object) cache.DeletedFinalStateUnknown {
		return cache.DeletedFinalStateUnknown{Key: "ns/x", Obj: obj}
	}
	w.serviceEvents(logger).OnDelete(tomb(service("gone", "10.96.0.1", nil)))
	// Tombstones hold the cached object: the converted slice.
	w.endpointSliceEvents(logger).OnDelete(tomb(model.NewEndpointSlice(slice("gone-abc", nil), "node1", nil)))
	w.nodeEvents(logger).OnDelete(tomb(node("node1", "")))
	// Tombstones of the wrong type are dropped, not passed on.
	w.serviceEvents(logger).OnDelete(tomb(node("node1", "")))
	w.serviceEvents(logger).OnDelete("garbage")

	want := []string{"service delete gone", "slice delete gone-abc", "node delete node1"}
	if diff := cmp.Diff(want, r.snapshot()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestServiceCIDRsRecomputedFromAllObjects(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(
		serviceCIDR("a", "10.96.0.0/16"),
		serviceCIDR("b", "10.96.0.0/16", "10.97.0.0/16"),
	)
	w := New(client, "node1", 0)
	r := &recorder{}
	w.AddServiceCIDRHandler(r)
	startWatcher(t, w)
	eventually(t, "initial cidrs", func() bool { return r.has("cidrs [10.96.0.0/16 10.97.0.0/16]") })

	// Deleting "b" keeps 10.96.0.0/16, which "a" still holds.
	if err := client.NetworkingV1().ServiceCIDRs().Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "cidrs after delete", func() bool { return r.has("cidrs [10.96.0.0/16]") })
}

func TestTopologyOnlyOnChange(t *testing.T) {
	r := &recorder{}
	topo := &topology{handlers: []NodeTopologyHandler{r}, logger: klog.Background()}
	topo.onNode(node("n", "")) // no labels: nothing to report (as upstream)
	topo.onNode(node("n", "zone-a"))
	topo.onNode(node("n", "zone-a")) // unchanged
	topo.onNode(node("n", "zone-b"))
	topo.onNode(node("n", ""))
	want := []string{
		"topology map[topology.kubernetes.io/zone:zone-a]",
		"topology map[topology.kubernetes.io/zone:zone-b]",
		"topology map[]",
	}
	if diff := cmp.Diff(want, r.snapshot()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestSharedNodeInformer(t *testing.T) {
	client := fake.NewClientset(node("node1", "zone-a"))
	// The owner (the node manager) creates and starts the informer.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	informer := NewNodeInformer(client, "node1", 0, StripManagedFields)
	w := New(client, "node1", 0, WithNodeInformer(informer))
	r := &recorder{}
	w.AddNodeHandler(r)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	// Whether the owner starts the informer before or after Run registers the
	// handlers, they see the existing objects.
	informerDone := make(chan error, 1)
	go func() { informerDone <- informer.Run(ctx) }()
	select {
	case <-w.Synced():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("timed out")
	}
	if !r.has("node change node1") {
		t.Errorf("events %q", r.snapshot())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := <-informerDone; err != nil {
		t.Errorf("informer Run: %v", err)
	}
}

func TestRunWithoutSync(t *testing.T) {
	w := New(fake.NewClientset(), "node1", 0)
	w.AddServiceHandler(&recorder{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Run(ctx); err == nil {
		t.Fatal("Run with a cancelled context should fail before sync")
	}
	if err := w.Run(context.Background()); err == nil {
		t.Fatal("second Run should fail")
	}
}

func TestRESTConfig(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- cluster: {server: "https://from-file:6443"}
  name: c
contexts:
- context: {cluster: c, user: u}
  name: ctx
current-context: ctx
users:
- name: u
  user: {token: t}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg, err := RESTConfig(ctx, ClientConnection{Kubeconfig: kubeconfig, QPS: 5, Burst: 10})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://from-file:6443" || cfg.ContentType != DefaultContentType || cfg.QPS != 5 || cfg.Burst != 10 {
		t.Errorf("unexpected config: host=%s contentType=%s qps=%v burst=%d", cfg.Host, cfg.ContentType, cfg.QPS, cfg.Burst)
	}
	cfg, err = RESTConfig(ctx, ClientConnection{Kubeconfig: kubeconfig, Master: "https://override:6443", ContentType: "application/json", AcceptContentTypes: "application/json"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://override:6443" || cfg.ContentType != "application/json" || cfg.AcceptContentTypes != "application/json" {
		t.Errorf("unexpected config: host=%s contentType=%s accept=%s", cfg.Host, cfg.ContentType, cfg.AcceptContentTypes)
	}
	cfg, err = RESTConfig(ctx, ClientConnection{Master: "http://127.0.0.1:8080"})
	if err != nil || cfg.Host != "http://127.0.0.1:8080" {
		t.Errorf("master only: %v, %+v", err, cfg)
	}
	if _, err := NewClient(ctx, ClientConnection{Master: "http://127.0.0.1:8080"}); err != nil {
		t.Errorf("NewClient: %v", err)
	}
}

func TestEventBroadcaster(t *testing.T) {
	client := fake.NewClientset()
	broadcaster, recorder := NewEventBroadcaster(client)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	defer broadcaster.Shutdown()
	recorder.Eventf(NodeRef("node1"), nil, v1.EventTypeNormal, "Starting", "StartKubeProxy", "")
	eventually(t, "event created", func() bool {
		list, err := client.EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			return false
		}
		e := list.Items[0]
		return e.ReportingController == ComponentName && e.Reason == "Starting" && e.Regarding.Name == "node1"
	})
}
