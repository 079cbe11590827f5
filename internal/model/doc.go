// Package model is kproxy's pure model of Services and their endpoints, from which
// every dataplane mode renders its rules.
//
// It reproduces the semantics of upstream kube-proxy v1.37.2 (pkg/proxy: the service and
// endpoints change trackers, the EndpointSlice cache and CategorizeEndpoints) with an API
// shaped for incremental syncs:
//
//   - ServicePortsForFamily converts a v1.Service into the ServicePorts of one IP family.
//   - NewEndpointSlice converts an EndpointSlice once, when it arrives, into the
//     endpoints of each of its ports (EndpointSlice: what the informer cache holds);
//     EndpointsForService merges a Service's converted slices into per-port lists
//     that point into them, so the cache and the model share every endpoint.
//   - CategorizeEndpoints splits a port's endpoints by traffic policy and topology.
//   - DecideRouting decides, once for every mode, which endpoint selection serves
//     internal and external traffic, whether the external entry point exists,
//     masquerades or short-circuits, and whether unserved traffic is rejected or
//     dropped (Routing); the renderers read it instead of deciding again.
//   - ExplainEndpoints says, on demand, why each endpoint is or is not in each
//     selection and used for each traffic source (Exclusion), reading the view's
//     lists so that it cannot disagree with what is programmed (the state API and
//     `kube-proxy explain`).
//   - State tracks changes from informers (On* handlers, safe from any goroutine;
//     AddEndpointSlice and its siblings take API objects and convert them) and
//     applies them on Commit, which costs time proportional to what changed and returns
//     an Update describing exactly that. After Commit the sync loop reads cached
//     ServicePortViews; other goroutines read them through State.Inspect.
//
// Topology: OnNodeTopologyChange only matters through the zone label. When the zone
// changes, Commit re-categorizes the Services whose endpoints carry zone hints (no other
// Service's view can depend on the zone; node hints depend on the node name, which is
// fixed) and lists in Update.Changed those whose view actually changed.
//
// Contract: the package does no I/O, does not log and holds no global state. Bad API data
// never panics: it is skipped as upstream skips it and reported as a *DataError so that
// the caller can log it and emit an Event. What no kernel could hold (a Service or
// EndpointSlice port number outside 1-65535, a node port outside 0-65535, a protocol other
// than TCP, UDP and SCTP: all refused by the API server) is skipped the same way, though
// upstream passes it on, so that one such object cannot make a node's whole ruleset fail
// to load (the fuzz targets of fuzz_test.go check that the renderers' output of any input
// encodes). One State serves one IP family; a dual-stack
// proxy runs two and sends every event to both.
package model
