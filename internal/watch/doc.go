// Package watch feeds kproxy from the Kubernetes API, as kube-proxy's informers do.
//
// A Watcher runs informers with kube-proxy's selectors:
//   - Services without the service.kubernetes.io/service-proxy-name label and not
//     headless (field selector spec.clusterIP!=None);
//   - EndpointSlices without the service.kubernetes.io/headless label (the
//     service-proxy-name label is not filtered on EndpointSlices, as upstream);
//   - ServiceCIDRs (networking.k8s.io/v1), reported as the complete set of CIDRs;
//   - this node only (field selector metadata.name=<node>), optionally sharing the
//     node manager's informer.
//
// Cached objects are trimmed to what the proxy reads (Trimmer.TrimForProxy: no
// managedFields anywhere; Services also lose labels, annotations and the selector;
// EndpointSlices are cached converted, as model.EndpointSlice, for this node, and
// the handlers receive them so). Events fan out, in
// registration order, to typed handlers (ServiceHandler, EndpointSliceHandler,
// NodeHandler, NodeTopologyHandler, ServiceCIDRHandler) whose shape follows
// upstream's pkg/proxy/config. An informer is only started for a kind that has at
// least one handler. Handlers are called from informer goroutines, one per kind, and
// must be safe for concurrent use across kinds.
//
// The informers are Informer: client-go's Reflector, RealFIFO and Indexer as its
// shared informer uses them, making the same requests, with a shorter relist
// back-off (RelistBackoff), which the shared informer does not let a caller set;
// NewNodeInformer is the node manager's, shared with the Watcher.
//
// The package also builds the API client (NewClient) and the events broadcaster and
// recorder (NewEventBroadcaster) for component "kube-proxy". The client's transport
// holds a GET whose connection could not be opened and retries it until the API
// server answers (at most one retry a second across the process, all at once when
// one gets through), so the informers resume within about a second of the server's
// return instead of after client-go's reflector back-off of up to a minute; nothing
// else about the requests changes (reconnect.go).
package watch
