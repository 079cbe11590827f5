package watch

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
)

// ComponentName is the reporting controller of kproxy's events, as kube-proxy's.
const ComponentName = "kube-proxy"

// NewEventBroadcaster returns an events.k8s.io/v1 broadcaster writing through the
// client, and a recorder for component "kube-proxy". The caller owns the
// broadcaster: StartRecordingToSinkWithContext(ctx) to start, Shutdown() to stop.
func NewEventBroadcaster(client kubernetes.Interface) (events.EventBroadcaster, events.EventRecorderLogger) {
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	return broadcaster, broadcaster.NewRecorder(scheme.Scheme, ComponentName)
}

// NodeRef is the object kube-proxy's node-level events are about.
func NodeRef(nodeName string) *v1.ObjectReference {
	return &v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: nodeName}
}
