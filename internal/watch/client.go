package watch

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultContentType is kube-proxy's default for clientConnection.contentType.
const DefaultContentType = "application/vnd.kubernetes.protobuf"

// ClientConnection is kube-proxy's clientConnection configuration plus the
// deprecated --master flag.
type ClientConnection struct {
	// Kubeconfig is the path of a kubeconfig file; with neither Kubeconfig nor
	// Master the in-cluster configuration is used.
	Kubeconfig string
	// Master overrides the server URL of the kubeconfig.
	Master string
	// ContentType of requests; DefaultContentType when empty.
	ContentType string
	// AcceptContentTypes is the Accept header ("" lets client-go choose).
	AcceptContentTypes string
	// QPS and Burst rate-limit the client (client-go defaults when zero).
	QPS   float32
	Burst int32
}

// RESTConfig resolves the connection settings into a rest.Config. Its transport
// retries GETs that could not connect, about every ReconnectInterval, until the
// API server answers (see reconnectTransport for why).
func RESTConfig(ctx context.Context, cfg ClientConnection) (*rest.Config, error) {
	var restConfig *rest.Config
	var err error
	if cfg.Kubeconfig == "" && cfg.Master == "" {
		klog.FromContext(ctx).Info("Neither kubeconfig file nor master URL was specified, falling back to in-cluster config")
		restConfig, err = rest.InClusterConfig()
	} else {
		// Load the kubeconfig (if any), then override the server with Master.
		restConfig, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: cfg.Kubeconfig},
			&clientcmd.ConfigOverrides{ClusterInfo: clientcmdapi.Cluster{Server: cfg.Master}},
		).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("building API client configuration: %w", err)
	}
	restConfig.ContentType = cfg.ContentType
	if restConfig.ContentType == "" {
		restConfig.ContentType = DefaultContentType
	}
	restConfig.AcceptContentTypes = cfg.AcceptContentTypes
	restConfig.QPS = cfg.QPS
	restConfig.Burst = int(cfg.Burst)
	logger := klog.FromContext(ctx)
	restConfig.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return newReconnectTransport(rt, logger, clock.RealClock{}, ReconnectInterval)
	})
	return restConfig, nil
}

// NewClient builds the API client. It does not contact the server.
func NewClient(ctx context.Context, cfg ClientConnection) (kubernetes.Interface, error) {
	restConfig, err := RESTConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("creating API client: %w", err)
	}
	return client, nil
}
