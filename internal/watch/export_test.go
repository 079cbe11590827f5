package watch

import (
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

func newNodeFactoryForTest(client kubernetes.Interface) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTransform(StripManagedFields),
		informers.WithTweakListOptions(NodeListOptions("node1")))
}
