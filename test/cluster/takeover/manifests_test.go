package takeover

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/kproxy/kproxy/test/cluster/prober"
)

func TestBackendObjects(t *testing.T) {
	d := BackendDeployment("ns1", DefaultBackendImage, 3)
	svc := BackendService("ns1")
	if d.Namespace != "ns1" || svc.Namespace != "ns1" || d.Name != BackendName || svc.Name != BackendName {
		t.Errorf("names: deployment %s/%s, service %s/%s", d.Namespace, d.Name, svc.Namespace, svc.Name)
	}
	if *d.Spec.Replicas != 3 {
		t.Errorf("replicas = %d, want 3", *d.Spec.Replicas)
	}
	pod := d.Spec.Template
	if sel := labels.SelectorFromSet(d.Spec.Selector.MatchLabels); !sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the deployment's selector %v does not match its pods %v", sel, pod.Labels)
	}
	if sel := labels.SelectorFromSet(svc.Spec.Selector); !sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the service's selector %v does not match the backends %v", sel, pod.Labels)
	}
	c := pod.Spec.Containers[0]
	if c.Image != "registry.k8s.io/e2e-test-images/agnhost:2.66.1" || strings.Join(c.Args, " ") != "netexec --http-port=8080 --udp-port=8081" {
		t.Errorf("backend container: %s %v", c.Image, c.Args)
	}
	if rp := c.ReadinessProbe; rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Port.IntValue() != 8080 {
		t.Errorf("backend readiness probe = %+v, want HTTP on 8080", rp)
	}
	if tsc := pod.Spec.TopologySpreadConstraints; len(tsc) != 1 || tsc[0].TopologyKey != corev1.LabelHostname || tsc[0].WhenUnsatisfiable != corev1.ScheduleAnyway {
		t.Errorf("backends are not spread over the nodes: %+v", tsc)
	}

	if svc.Spec.Type != corev1.ServiceTypeNodePort || *svc.Spec.IPFamilyPolicy != corev1.IPFamilyPolicyPreferDualStack {
		t.Errorf("service type %s, family policy %s; want NodePort, PreferDualStack", svc.Spec.Type, *svc.Spec.IPFamilyPolicy)
	}
	var ports []string
	for _, p := range svc.Spec.Ports {
		ports = append(ports, string(p.Protocol)+" "+p.TargetPort.String())
		if p.Port != 80 {
			t.Errorf("service port %s is %d, want 80", p.Name, p.Port)
		}
	}
	if got := strings.Join(ports, ","); got != "TCP 8080,UDP 8081" {
		t.Errorf("service ports = %s, want TCP 80->8080 and UDP 80->8081", got)
	}
}

func TestProberDaemonSet(t *testing.T) {
	targets, err := prober.ParseTargets([]string{"tcp://10.96.0.5:80", "udp://[fd00:10:96::5]:80"})
	if err != nil {
		t.Fatal(err)
	}
	ds := ProberDaemonSet("ns1", DefaultProberImage, targets, 20, time.Second)
	c := ds.Spec.Template.Spec.Containers[0]
	if c.Image != "kproxy.local/prober:dev" || c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("prober image %s pulled %s, want kproxy.local/prober:dev, never pulled", c.Image, c.ImagePullPolicy)
	}
	want := "run --name=$(NODE_NAME) --listen=127.0.0.1:9999 --rate=20 --timeout=1s --target=tcp://10.96.0.5:80 --target=udp://[fd00:10:96::5]:80"
	if got := strings.Join(c.Args, " "); got != want {
		t.Errorf("prober args:\n got %s\nwant %s", got, want)
	}
	if len(c.Env) != 1 || c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("prober env = %+v, want NODE_NAME from spec.nodeName", c.Env)
	}
	if sel := labels.SelectorFromSet(ds.Spec.Selector.MatchLabels); !sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
		t.Errorf("the daemonset's selector %v does not match its pods", sel)
	}
}

func TestToYAML(t *testing.T) {
	targets, _ := prober.ParseTargets([]string{"tcp://10.96.0.5:80"})
	y, err := ToYAML(NamespaceObject("ns1"), BackendDeployment("ns1", "img", 3), BackendService("ns1"), ProberDaemonSet("ns1", "p", targets, 20, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(strings.TrimPrefix(string(y), "---\n"), "\n---\n")
	var kinds []string
	for _, doc := range docs {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name, Namespace string
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("document %q: %v", doc, err)
		}
		kinds = append(kinds, meta.APIVersion+" "+meta.Kind+" "+meta.Metadata.Namespace+"/"+meta.Metadata.Name)
	}
	want := "v1 Namespace /ns1,apps/v1 Deployment ns1/backend,v1 Service ns1/backend,apps/v1 DaemonSet ns1/kproxy-prober"
	if got := strings.Join(kinds, ","); got != want {
		t.Errorf("documents:\n got %s\nwant %s", got, want)
	}
	var ds appsv1.DaemonSet
	if err := yaml.Unmarshal([]byte(docs[3]), &ds); err != nil || ds.Spec.Template.Spec.Containers[0].Args[5] != "--target=tcp://10.96.0.5:80" {
		t.Errorf("the DaemonSet does not read back: %v %+v", err, ds.Spec.Template.Spec.Containers)
	}
}
