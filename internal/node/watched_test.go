package node

import (
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// watchedClientset is a fake clientset that reports when the informer's Node watch
// is established. Start returns as soon as the list is in (no polling delay), and
// the fake, unlike an API server, does not replay changes made before a watch
// exists: a test must wait for the watch before changing the Node.
func watchedClientset(objs ...runtime.Object) (*fake.Clientset, func(t *testing.T)) {
	client := fake.NewClientset(objs...)
	watching := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("nodes", func(action clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := action.(clienttesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		once.Do(func() { close(watching) })
		return true, w, nil
	})
	return client, func(t *testing.T) {
		t.Helper()
		select {
		case <-watching:
		case <-time.After(10 * time.Second):
			t.Fatal("the informer never watched Nodes")
		}
	}
}
