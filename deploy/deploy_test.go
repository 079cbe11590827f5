package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kproxy/kproxy/internal/config"
)

// objects decodes every document of every manifest in this directory strictly
// (unknown or duplicate fields fail) with client-go's scheme.
func objects(t *testing.T) []runtime.Object {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no manifests")
	}
	decoder := strictDecoder()
	var objs []runtime.Object
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := reader.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			obj, gvk, err := decoder.Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			t.Logf("%s: %s", file, gvk.Kind)
			objs = append(objs, obj)
		}
	}
	return objs
}

func strictDecoder() runtime.Decoder {
	return serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
}

// TestStrictDecoder makes sure the manifests' decoder refuses unknown fields, so
// that a misspelt field in a manifest fails TestManifests.
func TestStrictDecoder(t *testing.T) {
	doc := []byte("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: x\nspec: {}\n")
	if _, _, err := strictDecoder().Decode(doc, nil, nil); !runtime.IsStrictDecodingError(err) {
		t.Errorf("unknown field: got %v, want a strict decoding error", err)
	}
}

func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// one returns the only object of type T named name.
func one[T runtime.Object](t *testing.T, objs []runtime.Object, name string) T {
	t.Helper()
	var found []T
	for _, obj := range objs {
		if o, ok := obj.(T); ok && objectName(obj) == name {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("%T %q: %d objects, want 1", zero, name, len(found))
	}
	return found[0]
}

func objectName(obj runtime.Object) string {
	if o, ok := obj.(interface{ GetName() string }); ok {
		return o.GetName()
	}
	return ""
}

func TestManifests(t *testing.T) {
	objs := objects(t)
	if len(objs) != 6 {
		t.Errorf("%d objects, want 6 (ServiceAccount, ClusterRoleBinding, Role, RoleBinding, ConfigMap, DaemonSet)", len(objs))
	}
	for _, obj := range objs {
		if o, ok := obj.(interface{ GetNamespace() string }); ok {
			_, cluster := obj.(*rbacv1.ClusterRoleBinding)
			if want := map[bool]string{true: "", false: "kube-system"}[cluster]; o.GetNamespace() != want {
				t.Errorf("%T %s: namespace %q, want %q", obj, objectName(obj), o.GetNamespace(), want)
			}
		}
	}
	one[*corev1.ServiceAccount](t, objs, "kube-proxy")

	crb := one[*rbacv1.ClusterRoleBinding](t, objs, "kubeadm:node-proxier")
	if crb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-proxier"}) {
		t.Errorf("ClusterRoleBinding roleRef %+v, want the built-in ClusterRole system:node-proxier", crb.RoleRef)
	}
	wantSA := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "kube-proxy", Namespace: "kube-system"}}
	if !slices.Equal(crb.Subjects, wantSA) {
		t.Errorf("ClusterRoleBinding subjects %+v, want %+v", crb.Subjects, wantSA)
	}

	role := one[*rbacv1.Role](t, objs, "kube-proxy")
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Verbs, []string{"get"}) ||
		!slices.Equal(role.Rules[0].Resources, []string{"configmaps"}) ||
		!slices.Equal(role.Rules[0].ResourceNames, []string{"kube-proxy"}) {
		t.Errorf("Role rules %+v, want get on configmaps/kube-proxy", role.Rules)
	}
	rb := one[*rbacv1.RoleBinding](t, objs, "kube-proxy")
	wantGroup := []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "system:bootstrappers:kubeadm:default-node-token"}}
	if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != "kube-proxy" || !slices.Equal(rb.Subjects, wantGroup) {
		t.Errorf("RoleBinding %+v %+v, want Role kube-proxy for %+v", rb.RoleRef, rb.Subjects, wantGroup)
	}

	checkDaemonSet(t, one[*appsv1.DaemonSet](t, objs, "kube-proxy"))
	checkConfigMap(t, one[*corev1.ConfigMap](t, objs, "kube-proxy"))
}

func checkDaemonSet(t *testing.T, ds *appsv1.DaemonSet) {
	label := map[string]string{"k8s-app": "kube-proxy"}
	if !maps.Equal(ds.Labels, label) || ds.Spec.Selector == nil || !maps.Equal(ds.Spec.Selector.MatchLabels, label) ||
		!maps.Equal(ds.Spec.Template.Labels, label) {
		t.Errorf("labels %v, selector %v, template labels %v, want %v", ds.Labels, ds.Spec.Selector, ds.Spec.Template.Labels, label)
	}
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType {
		t.Errorf("updateStrategy %q", ds.Spec.UpdateStrategy.Type)
	}
	pod := ds.Spec.Template.Spec
	if !pod.HostNetwork {
		t.Error("hostNetwork is not set")
	}
	if pod.PriorityClassName != "system-node-critical" {
		t.Errorf("priorityClassName %q", pod.PriorityClassName)
	}
	if pod.ServiceAccountName != "kube-proxy" {
		t.Errorf("serviceAccountName %q", pod.ServiceAccountName)
	}
	if !slices.Equal(pod.Tolerations, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}) {
		t.Errorf("tolerations %+v, want one with operator Exists", pod.Tolerations)
	}
	if !maps.Equal(pod.NodeSelector, map[string]string{"kubernetes.io/os": "linux"}) {
		t.Errorf("nodeSelector %v", pod.NodeSelector)
	}

	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Name != "kube-proxy" {
		t.Errorf("container name %q", c.Name)
	}
	if want := "kproxy.local/kube-proxy:" + config.Version; c.Image != want {
		t.Errorf("image %q, want %q (make image's name for internal/config.Version)", c.Image, want)
	}
	if c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("imagePullPolicy %q", c.ImagePullPolicy)
	}
	wantCmd := []string{"/usr/local/bin/kube-proxy", "--config=/var/lib/kube-proxy/config.conf", "--hostname-override=$(NODE_NAME)"}
	if !slices.Equal(c.Command, wantCmd) || len(c.Args) != 0 {
		t.Errorf("command %q args %q, want %q", c.Command, c.Args, wantCmd)
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Error("container is not privileged")
	}
	if len(c.Env) != 1 || c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom == nil ||
		c.Env[0].ValueFrom.FieldRef == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("env %+v, want NODE_NAME from spec.nodeName", c.Env)
	}

	wantMounts := []corev1.VolumeMount{
		{Name: "kube-proxy", MountPath: "/var/lib/kube-proxy"},
		{Name: "xtables-lock", MountPath: "/run/xtables.lock"},
		{Name: "lib-modules", MountPath: "/lib/modules", ReadOnly: true},
	}
	if !slices.EqualFunc(c.VolumeMounts, wantMounts, func(a, b corev1.VolumeMount) bool {
		return a.Name == b.Name && a.MountPath == b.MountPath && a.ReadOnly == b.ReadOnly && a.SubPath == "" && a.MountPropagation == nil
	}) {
		t.Errorf("volumeMounts %+v, want %+v", c.VolumeMounts, wantMounts)
	}
	volumes := map[string]corev1.VolumeSource{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v.VolumeSource
	}
	if len(volumes) != 3 {
		t.Errorf("%d volumes, want 3", len(pod.Volumes))
	}
	if cm := volumes["kube-proxy"].ConfigMap; cm == nil || cm.Name != "kube-proxy" {
		t.Errorf("volume kube-proxy %+v, want the kube-proxy ConfigMap", volumes["kube-proxy"])
	}
	if hp := volumes["xtables-lock"].HostPath; hp == nil || hp.Path != "/run/xtables.lock" ||
		hp.Type == nil || *hp.Type != corev1.HostPathFileOrCreate {
		t.Errorf("volume xtables-lock %+v, want hostPath /run/xtables.lock FileOrCreate", volumes["xtables-lock"])
	}
	if hp := volumes["lib-modules"].HostPath; hp == nil || hp.Path != "/lib/modules" {
		t.Errorf("volume lib-modules %+v, want hostPath /lib/modules", volumes["lib-modules"])
	}
}

func checkConfigMap(t *testing.T, cm *corev1.ConfigMap) {
	if !maps.Equal(cm.Labels, map[string]string{"app": "kube-proxy"}) {
		t.Errorf("ConfigMap labels %v", cm.Labels)
	}
	if len(cm.Data) != 2 {
		t.Errorf("ConfigMap keys %v, want config.conf and kubeconfig.conf", len(cm.Data))
	}

	// config.conf: kproxy's own decoding (strict, no lenient fallback), then the
	// command line the DaemonSet runs, resolved and validated as at start.
	file, lenient, err := config.DecodeFile([]byte(cm.Data["config.conf"]))
	if err != nil {
		t.Fatalf("config.conf: %v", err)
	}
	if lenient != nil {
		t.Errorf("config.conf needs lenient decoding: %v", lenient)
	}
	if file.Mode != "iptables" {
		t.Errorf("config.conf mode %q, want iptables (what kubeadm v1.37 writes)", file.Mode)
	}
	if file.ClientConnection.Kubeconfig != "/var/lib/kube-proxy/kubeconfig.conf" {
		t.Errorf("config.conf clientConnection.kubeconfig %q", file.ClientConnection.Kubeconfig)
	}
	path := filepath.Join(t.TempDir(), "config.conf")
	if err := os.WriteFile(path, []byte(cm.Data["config.conf"]), 0o600); err != nil {
		t.Fatal(err)
	}
	fg, err := config.NewFeatureGate()
	if err != nil {
		t.Fatal(err)
	}
	opts := config.NewOptions(fg)
	fs := pflag.NewFlagSet("kube-proxy", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts.AddFlags(fs)
	if err := fs.Parse([]string{"--config=" + path, "--hostname-override=node-1"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := opts.Complete(fs)
	if err != nil {
		t.Fatalf("config.conf with the DaemonSet's flags: %v", err)
	}
	if cfg.Mode != config.ProxyModeIPTables || cfg.ModeDefaulted {
		t.Errorf("mode %q (defaulted %v), want iptables, chosen by the file", cfg.Mode, cfg.ModeDefaulted)
	}

	// kubeconfig.conf: the service account's token and CA, and an https server.
	kc, err := clientcmd.Load([]byte(cm.Data["kubeconfig.conf"]))
	if err != nil {
		t.Fatalf("kubeconfig.conf: %v", err)
	}
	ctx := kc.Contexts[kc.CurrentContext]
	if ctx == nil || kc.Clusters[ctx.Cluster] == nil || kc.AuthInfos[ctx.AuthInfo] == nil {
		t.Fatalf("kubeconfig.conf: current context %q is incomplete", kc.CurrentContext)
	}
	cluster, user := kc.Clusters[ctx.Cluster], kc.AuthInfos[ctx.AuthInfo]
	if !strings.HasPrefix(cluster.Server, "https://") {
		t.Errorf("kubeconfig.conf server %q, want https", cluster.Server)
	}
	if cluster.CertificateAuthority != "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt" {
		t.Errorf("kubeconfig.conf certificate-authority %q", cluster.CertificateAuthority)
	}
	if user.TokenFile != "/var/run/secrets/kubernetes.io/serviceaccount/token" {
		t.Errorf("kubeconfig.conf tokenFile %q", user.TokenFile)
	}
}
