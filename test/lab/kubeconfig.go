package lab

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeconfigBytes renders a kubeconfig for server with bearer-token auth. The API
// server's certificate is self-signed and throw-away, so TLS verification is skipped.
func KubeconfigBytes(server, token string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["lab"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["lab-admin"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["lab"] = &clientcmdapi.Context{Cluster: "lab", AuthInfo: "lab-admin", Namespace: "default"}
	cfg.CurrentContext = "lab"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("render kubeconfig: %w", err)
	}
	return b, nil
}
