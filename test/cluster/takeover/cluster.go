package takeover

import (
	"context"
	"io"
	"net/netip"

	"github.com/kproxy/kproxy/test/lab"
)

// Cluster is what Run needs of a running cluster (package test/cluster implements it).
type Cluster interface {
	// Kubectl runs kubectl with the cluster's kubeconfig, in the client namespace, with
	// stdin (nil for none). It returns kubectl's stdout; when kubectl fails, the error
	// carries its stderr.
	Kubectl(ctx context.Context, stdin io.Reader, args ...string) (string, error)
	// ClientNS is the network namespace outside the cluster, on the nodes' L2 segment.
	ClientNS() *lab.NS
	// WorkerAddresses are every worker node's InternalIPs, both families; ClientNS
	// reaches each of them directly.
	WorkerAddresses() []netip.Addr
	// SetProxyImage sets the image of the kube-proxy DaemonSet in kube-system (every
	// container of its pod template) and returns once the rollout is complete: every
	// pod of the DaemonSet updated and Ready.
	SetProxyImage(ctx context.Context, image string) error
	// StartClientProcess runs bin with args in ClientNS. The cluster stops it at
	// teardown if its caller has not.
	StartClientProcess(name, bin string, args ...string) (*lab.Process, error)
}
