// Package nftables is the end-to-end suite proving upstream kube-proxy's Service
// behaviours with real packets in the lab: ClusterIP, NodePort, LoadBalancer and
// external IPs, session affinity, traffic policies and health check node ports,
// topology hints and terminating fallback, no-endpoint rejects, masquerading and the
// local-traffic detectors, stale UDP conntrack entries and the proxy's lifecycle
// (other tables kept, restarts keeping connections, --cleanup, --init-only).
//
// Contract: one lab and one proxy per package (TestMain and sharedProxy); each test
// creates uniquely named Services and deletes them (with their EndpointSlices) on
// cleanup; every wait is bounded and says what it awaited. The proxy mode comes from
// $KPROXY_E2E_MODE (default nftables), so other modes can reuse the suite. Tests that
// need a differently configured proxy replace the shared one and restore it.
package nftables
