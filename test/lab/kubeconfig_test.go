package lab

import (
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func TestKubeconfigBytes(t *testing.T) {
	b, err := KubeconfigBytes("https://192.0.2.1:6443", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		t.Fatalf("load back: %v\n%s", err, b)
	}
	if cfg.Host != "https://192.0.2.1:6443" || cfg.BearerToken != "s3cret" || !cfg.TLSClientConfig.Insecure {
		t.Errorf("unexpected config: host=%q token=%q insecure=%v", cfg.Host, cfg.BearerToken, cfg.TLSClientConfig.Insecure)
	}
}
