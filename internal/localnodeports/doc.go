// Package localnodeports serves NodePorts on loopback in nftables mode, as upstream
// kube-proxy v1.37's KubeProxyNFTablesLocalhostNodePorts feature gate (alpha,
// KEP-6032) does with its userspace proxy (pkg/proxy/localnodeportproxy).
//
// nftables cannot DNAT traffic to 127.0.0.0/8 or ::1 (the kernel drops loopback
// packets routed off the host unless route_localnet is set, which upstream's
// nftables mode never sets), so the nftables table never matches loopback NodePorts.
// With the gate on and nodePortAddresses explicitly including loopback for a family
// (e.g. "localhost", "127.0.0.0/8", "::1/128"; not a catch-all 0.0.0.0/0), a TCP
// listener on 127.0.0.1:<nodePort> (IPv4) or [::1]:<nodePort> (IPv6) per TCP
// NodePort with endpoints forwards each connection to one of the Service's
// endpoints; the table rejects and counts localhost UDP and SCTP NodePort traffic
// (internal/render/nftables, Config.LocalhostNodePorts), and TCP too when no listener
// serves this family. With the gate off nothing here runs.
//
// # Pure part
//
//	ServesLoopback(family, nodePortAddresses) bool  upstream's ContainsExplicitLoopback
//	SpecFor(family, view) (Spec, bool)              the listener one ServicePort needs
//	Tracker                                         the listeners of the applied model
//
// A Spec is the listener of one TCP NodePort: its endpoints are the Local-policy
// endpoints when externalTrafficPolicy is Local, else the Cluster-policy ones (as
// categorized by the model: topology, terminating fallback), of the family; a
// NodePort without any has no listener (the kernel refuses connections). ClientIP
// session affinity pins every localhost connection (all from the same loopback
// source) to one endpoint for the stickiness timeout, renewed by each connection, as
// upstream.
//
// # Manager contract
//
//   - New has no side effects. Sync(specs) records the desired listeners and, while
//     Run runs, reconciles at once (on the caller's goroutine, without blocking on
//     traffic): listeners no longer wanted are closed together with their
//     connections, new ones are bound, existing ones take the new endpoints (a
//     changed affinity timeout drops the pin). Specs handed before Run are applied
//     when Run starts. Two Specs with one NodePort: the first in the list wins
//     (Tracker lists them by ServicePort name).
//   - A listener that cannot be bound (the port is in use) is logged and counted in
//     kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total, and
//     tried again at the next Sync (the proxier calls Sync after every successful
//     sync, as upstream's SyncNodePorts). kubeproxy_nftables_localhost_nodeport_listeners
//     is the number of bound listeners after each reconcile, 0 once Run returned.
//   - Run(ctx) owns every goroutine (accept loops, one per connection and its two
//     copy directions) in an errgroup; when ctx is done it closes every listener and
//     connection, waits for all of them and returns nil. Run may be called once.
//   - A connection is dialled to an endpoint picked at random (5 s timeout); if the
//     dial fails the client's connection is closed. Data is copied both ways with
//     half-closes; an error in either direction closes both sides.
//   - The logger comes from Run's context; there is no global state.
//
// Interface is what the proxier side needs (Sync); Fake records the Syncs for tests.
package localnodeports
