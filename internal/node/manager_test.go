package node

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

func testNode(podCIDRs []string, addresses ...v1.NodeAddress) *v1.Node {
	n := nodeWith(addresses...)
	n.Spec.PodCIDRs = podCIDRs
	n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	return n
}

func fastConfig(watchPodCIDRs bool) Config {
	return Config{
		NodeName:        "node1",
		WatchPodCIDRs:   watchPodCIDRs,
		PollInterval:    5 * time.Millisecond,
		NodeIPsTimeout:  200 * time.Millisecond,
		PodCIDRsTimeout: 200 * time.Millisecond,
	}
}

// runManager runs m.Run in the background and returns a function that waits, with a
// bound, for its result.
func runManager(t *testing.T, ctx context.Context, m *Manager) func() error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	return func() error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return")
			return nil
		}
	}
}

func updateNode(t *testing.T, client *fake.Clientset, mutate func(*v1.Node)) {
	t.Helper()
	ctx := context.Background()
	n, err := client.CoreV1().Nodes().Get(ctx, "node1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mutate(n)
	if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestManagerNodeIPsChange(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client, waitWatch := watchedClientset(testNode(nil, internal("10.0.0.1"), internal("fd00::1")))
	m := NewManager(client, fastConfig(false))
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := m.NodeIPs(); !slices.Equal(got, addrs("10.0.0.1", "fd00::1")) {
		t.Fatalf("NodeIPs = %v", got)
	}
	if n := m.Node(); n == nil || len(n.ManagedFields) != 0 {
		t.Fatalf("Node = %+v; want the node without managedFields", n)
	}
	result := runManager(t, ctx, m)

	// Changes that do not matter (a label; podCIDRs when not watched) are ignored;
	// the IP change behind them is reported.
	waitWatch(t)
	updateNode(t, client, func(n *v1.Node) { n.Labels = map[string]string{v1.LabelTopologyZone: "a"} })
	updateNode(t, client, func(n *v1.Node) { n.Spec.PodCIDRs = []string{"10.244.0.0/24"} })
	updateNode(t, client, func(n *v1.Node) { n.Status.Addresses = []v1.NodeAddress{internal("10.0.0.2"), internal("fd00::1")} })
	if err := result(); !errors.Is(err, ErrNodeIPsChanged) {
		t.Fatalf("Run = %v, want ErrNodeIPsChanged", err)
	}
	if n := m.Node(); n.Labels[v1.LabelTopologyZone] != "a" {
		t.Errorf("Node not updated: %+v", n.Labels)
	}
}

func TestManagerRunReturnsNilOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(testNode(nil, internal("10.0.0.1")))
	m := NewManager(client, fastConfig(false))
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	result := runManager(t, ctx, m)
	cancel()
	if err := result(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
}

func TestManagerWaitsForNode(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	m := NewManager(client, Config{NodeName: "node1", PollInterval: 5 * time.Millisecond, NodeIPsTimeout: 10 * time.Second})
	go func() {
		// Create the node once the manager is watching.
		_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			for _, a := range client.Actions() {
				if a.GetVerb() == "watch" && a.GetResource().Resource == "nodes" {
					return true, nil
				}
			}
			return false, nil
		})
		_, _ = client.CoreV1().Nodes().Create(ctx, testNode(nil, internal("10.0.0.1")), metav1.CreateOptions{})
	}()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := m.NodeIPs(); !slices.Equal(got, addrs("10.0.0.1")) {
		t.Fatalf("NodeIPs = %v", got)
	}
}

func TestManagerTimesOutWithoutNode(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	m := NewManager(client, fastConfig(false))
	// Without podCIDR watching, a missing node is not fatal (as kube-proxy).
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if len(m.NodeIPs()) != 0 || m.Node() != nil {
		t.Fatalf("NodeIPs = %v, Node = %v", m.NodeIPs(), m.Node())
	}
	// The node showing up with addresses later means a restart.
	result := runManager(t, ctx, m)
	if _, err := client.CoreV1().Nodes().Create(ctx, testNode(nil, internal("10.0.0.1")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := result(); !errors.Is(err, ErrNodeIPsChanged) {
		t.Fatalf("Run = %v, want ErrNodeIPsChanged", err)
	}
}

func TestManagerPodCIDRs(t *testing.T) {
	t.Run("missing node is an error", func(t *testing.T) {
		m := NewManager(fake.NewClientset(), fastConfig(true))
		err := m.Start(t.Context())
		if err == nil || err.Error() != `timeout waiting for node "node1" to exist` {
			t.Fatalf("Start = %v", err)
		}
	})
	t.Run("missing podCIDRs is an error", func(t *testing.T) {
		m := NewManager(fake.NewClientset(testNode(nil, internal("10.0.0.1"))), fastConfig(true))
		err := m.Start(t.Context())
		if err == nil || err.Error() != `timeout waiting for PodCIDR allocation on node "node1"` {
			t.Fatalf("Start = %v", err)
		}
	})
	t.Run("podCIDRs change means restart", func(t *testing.T) {
		ctx := t.Context()
		client, waitWatch := watchedClientset(testNode([]string{"10.244.0.0/24"}, internal("10.0.0.1")))
		m := NewManager(client, fastConfig(true))
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if got := m.PodCIDRs(); !slices.Equal(got, []string{"10.244.0.0/24"}) {
			t.Fatalf("PodCIDRs = %v", got)
		}
		result := runManager(t, ctx, m)
		waitWatch(t)
		updateNode(t, client, func(n *v1.Node) { n.Spec.PodCIDRs = []string{"10.244.0.0/24", "fd00:10:244::/64"} })
		if err := result(); !errors.Is(err, ErrPodCIDRsChanged) {
			t.Fatalf("Run = %v, want ErrPodCIDRsChanged", err)
		}
	})
}

func TestManagerNodeDeleted(t *testing.T) {
	ctx := t.Context()
	client, waitWatch := watchedClientset(testNode(nil, internal("10.0.0.1")))
	m := NewManager(client, fastConfig(false))
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	result := runManager(t, ctx, m)
	waitWatch(t)
	if err := client.CoreV1().Nodes().Delete(ctx, "node1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := result(); !errors.Is(err, ErrNodeDeleted) {
		t.Fatalf("Run = %v, want ErrNodeDeleted", err)
	}
}

func TestManagerTombstone(t *testing.T) {
	m := NewManager(fake.NewClientset(), fastConfig(false))
	m.onNodeDelete(context.Background(), cache.DeletedFinalStateUnknown{Key: "node1", Obj: testNode(nil)})
	select {
	case err := <-m.changed:
		if !errors.Is(err, ErrNodeDeleted) {
			t.Fatalf("got %v", err)
		}
	default:
		t.Fatal("tombstone not reported")
	}
	m.onNodeDelete(context.Background(), "garbage")
	select {
	case err := <-m.changed:
		t.Fatalf("garbage reported as %v", err)
	default:
	}
}
