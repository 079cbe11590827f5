package nftables

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kproxy/kproxy/test/e2e/proxytest"
)

// TestDefaultModeIsIPTables runs when the suite's configuration leaves the mode blank
// (KPROXY_E2E_MODE=default, kubeadm's ConfigMap): the proxy runs iptables mode, as
// upstream, and the Warning Event KubeProxyDefaultMode reaches the API server.
func TestDefaultModeIsIPTables(t *testing.T) {
	if configuredMode() != modeDefault {
		t.Skipf("the configuration names mode %s (%s=%s runs this test)", configuredMode(), ModeEnv, modeDefault)
	}
	p := sharedProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, body, err := p.Get(ctx, proxytest.ModeURL)
	if err != nil || code != http.StatusOK || body != modeIPTables {
		t.Errorf("GET /proxyMode: %d %v %q, want 200 %q", code, err, body, modeIPTables)
	}
	err = p.WaitFor(ctx, "the KubeProxyDefaultMode Warning event for node1", 20*time.Second, func(ctx context.Context) error {
		events, err := p.Lab.Client.EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == "KubeProxyDefaultMode" && e.Type == v1.EventTypeWarning &&
				e.ReportingController == "kube-proxy" && e.Action == "StartKubeProxy" &&
				e.Regarding.Kind == "Node" && e.Regarding.Name == p.Lab.Node1.Name &&
				strings.Contains(e.Note, "defaulting to 'iptables'") {
				return nil
			}
		}
		return fmt.Errorf("%d events, none is it", len(events.Items))
	})
	if err != nil {
		t.Fatal(err)
	}
}
