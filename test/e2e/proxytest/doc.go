// Package proxytest runs kproxy's kube-proxy binary inside a lab's node namespace for
// end-to-end tests: it builds the binary once per test process, writes a
// KubeProxyConfiguration pointing at the lab's API server, starts the proxy as a lab
// process (stopped at lab teardown), and talks to its health and metrics servers
// through sockets created inside the node namespace.
package proxytest
