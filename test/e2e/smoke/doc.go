// Package smoke checks the lab itself end to end: the real API server answers through
// client-go informers, pods on both nodes reach each other over TCP and UDP, IPv4 and
// IPv6, the external client reaches node1 and routed pods, and teardown leaves nothing.
// It needs root and the binaries in _output/bin; otherwise it skips (or fails when
// KPROXY_E2E_REQUIRED=1). In -short mode it always skips.
package smoke
