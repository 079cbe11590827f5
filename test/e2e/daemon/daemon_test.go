package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
)

func TestHealthMetricsAndMode(t *testing.T) {
	p := sharedProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, url := range []string{proxytest.HealthzURL, proxytest.LivezURL} {
		code, body, err := p.Get(ctx, url)
		if err != nil || code != http.StatusOK {
			t.Errorf("GET %s: %d %v %s", url, code, err, body)
		}
		if !strings.Contains(body, `"lastUpdated"`) || !strings.Contains(body, `"currentTime"`) {
			t.Errorf("GET %s: body lacks upstream's fields: %s", url, body)
		}
	}
	code, body, err := p.Get(ctx, proxytest.ModeURL)
	if err != nil || code != http.StatusOK || body != "nftables" {
		t.Errorf("GET /proxyMode: %d %v %q, want 200 \"nftables\"", code, err, body)
	}
	// /healthz is 200 before the first sync (nothing is overdue yet); the metrics of
	// a sync appear once the first one of both families ran.
	want := []string{
		`kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"}`,
		`kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"}`,
		`kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.001"}`,
		`kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"}`,
		`kubeproxy_proxy_healthz_total{code="200"}`,
		"kubeproxy_sync_proxy_rules_service_changes_pending 0",
	}
	err = p.WaitFor(ctx, "the first sync of both families in /metrics", 20*time.Second, func(ctx context.Context) error {
		code, body, err = p.Get(ctx, proxytest.MetricsURL)
		if err != nil {
			return fmt.Errorf("GET /metrics: %w", err)
		}
		if code != http.StatusOK {
			return fmt.Errorf("GET /metrics: status %d", code)
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				return fmt.Errorf("/metrics lacks %s", w)
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	if t.Failed() {
		var kubeproxy []string
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "kubeproxy_") {
				kubeproxy = append(kubeproxy, line)
			}
		}
		t.Logf("kubeproxy_* series served:\n%s", strings.Join(kubeproxy, "\n"))
	}
}

func TestStartingEvent(t *testing.T) {
	p := sharedProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := p.WaitFor(ctx, "the Starting event of kube-proxy for node1", 20*time.Second, func(ctx context.Context) error {
		events, err := p.Lab.Client.EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == "Starting" && e.ReportingController == "kube-proxy" &&
				e.Regarding.Kind == "Node" && e.Regarding.Name == p.Lab.Node1.Name {
				return nil
			}
		}
		return fmt.Errorf("%d events, none is it", len(events.Items))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// createWebService creates a dual-stack TCP Service backed by every pod of the lab.
func createWebService(ctx context.Context, t *testing.T, l *lab.Lab, name string) *v1.Service {
	t.Helper()
	svc, err := l.CreateService(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.ServiceSpec{
			IPFamilyPolicy: ptr.To(v1.IPFamilyPolicyRequireDualStack),
			Ports:          []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := l.DeleteService(ctx, svc); err != nil {
			t.Log(err)
		}
	})
	eps := lab.PodEndpoints(l.Pods...)
	if _, err := l.SetEndpoints(ctx, svc, eps, nil); err != nil {
		t.Fatal(err)
	}
	return svc
}

// waitServiceAnswers waits until the Service's ClusterIP of every family answers a
// TCP probe from a pod on node1 with one of the Service's pods.
func waitServiceAnswers(ctx context.Context, t *testing.T, p *proxytest.Proxy, svc *v1.Service) {
	t.Helper()
	l := p.Lab
	client := l.Node1.Pods[0].NS
	for _, s := range svc.Spec.ClusterIPs {
		target := netip.AddrPortFrom(netip.MustParseAddr(s), 80)
		err := p.WaitFor(ctx, "ClusterIP "+target.String()+" answering", 20*time.Second, func(ctx context.Context) error {
			res := client.Probe(ctx, v1.ProtocolTCP, target)
			if res.Outcome != lab.Answered {
				return fmt.Errorf("probe: %s", res)
			}
			if l.Pod(res.Reply.Pod) == nil {
				return fmt.Errorf("answered by unknown pod %q", res.Reply.Pod)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestServiceIsProgrammed(t *testing.T) {
	p := sharedProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	svc := createWebService(ctx, t, p.Lab, "daemon-web")
	waitServiceAnswers(ctx, t, p, svc)
}

func TestSurvivesAPIServerRestart(t *testing.T) {
	p := sharedProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := p.Lab.RestartAPIServer(ctx); err != nil {
		t.Fatalf("restarting the API server: %v", err)
	}
	if done, err := p.Process.Exited(); done {
		t.Fatalf("the proxy exited when the API server restarted: %v\n%s", err, p.Process.LogTail(40))
	}
	// A Service created after the restart is programmed: the watches resumed.
	svc := createWebService(ctx, t, p.Lab, "after-restart")
	waitServiceAnswers(ctx, t, p, svc)
	if err := p.WaitHealthy(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}
