// Package lab builds a real, throw-away local cluster in network namespaces for the
// end-to-end tests, benchmarks and the demo of kproxy.
//
// Topology (dual stack; node and external addresses come from documentation ranges):
//
//	ext  ──(203.0.113.0/24, 2001:db8:2::/64)──  node1  ──(192.0.2.0/24, 2001:db8:1::/64)──  node2
//	                                             │ veth per pod                              │ veth per pod
//	                                    pods 10.244.1.x, fd00:10:244:1::x           pods 10.244.2.x, fd00:10:244:2::x
//
// node1 runs etcd and kube-apiserver (and, in later tests, the proxy under test); node2
// has no proxy. The external client's default route points at node1, so it reaches
// node1's addresses, the pods and LoadBalancer/external IPs (198.51.100.0/24,
// 2001:db8:3::/64) through node1. node2's default route points at node1 too.
//
// Contract:
//   - New has no side effects; Start builds everything and, when it fails midway, tears
//     down what it built; Close is idempotent and removes every namespace, process,
//     listener and (unless kept) the work directory. Close fails, and keeps the work
//     directory, when a process's log holds a race detector report (a daemon built
//     with -race carries on after one).
//   - Nothing is ever configured in the root network namespace: namespaces are created
//     with `ip netns add`, veth pairs are created directly inside lab namespaces, and
//     sysctls are written only inside lab namespaces.
//   - The test process reaches the API server and the pods without any route from the
//     root namespace: sockets are created inside a lab namespace (NS.Dial, NS.Listen),
//     and a socket keeps the namespace it was created in.
//   - Namespace names are <prefix><pid>-<random>-<role> (prefix "kpl-"); Start removes
//     leftovers with the prefix whose owning process is gone (and their temporary work
//     directories), so concurrent labs do not disturb each other. CloseOnSignal tears
//     down on SIGINT/SIGTERM; child processes also die with the owner (Pdeathsig, through
//     internal/testing/childproc: only with the owner, not with the thread that forked them).
//   - Node objects for node1 and node2 are registered by Start; EndpointSlices are
//     written as the EndpointSlice controller would (BuildEndpointSlices, SetEndpoints),
//     since no controller manager runs.
//   - Backends are in-process servers that answer every TCP connection and UDP datagram
//     with one line: "pod=<name> client=<ip>:<port>" (see ParseReply).
package lab
