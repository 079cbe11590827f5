package takeover

import (
	"bytes"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kproxy/kproxy/test/cluster/prober"
)

// Names of the objects Run creates in its namespace.
const (
	BackendName = "backend"       // the Deployment and the Service
	ProberName  = "kproxy-prober" // the DaemonSet

	nameLabel   = "app.kubernetes.io/name"
	backendApp  = "kproxy-takeover-backend"
	proberApp   = "kproxy-takeover-prober"
	servicePort = 80
	httpPort    = 8080
	udpPort     = 8081
	// proberListen is where each prober pod serves its summaries (inside the pod).
	proberListen = "127.0.0.1:9999"
)

// NamespaceObject is the test's namespace.
func NamespaceObject(name string) *corev1.Namespace {
	return &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}
}

// BackendDeployment is the agnhost netexec Deployment (HTTP on 8080, UDP on 8081),
// its replicas spread over the nodes.
func BackendDeployment(namespace, image string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{nameLabel: backendApp}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: BackendName, Namespace: namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew:           1,
						TopologyKey:       corev1.LabelHostname,
						WhenUnsatisfiable: corev1.ScheduleAnyway,
						LabelSelector:     &metav1.LabelSelector{MatchLabels: labels},
					}},
					// agnhost exits on SIGTERM; this only bounds the cleanup.
					TerminationGracePeriodSeconds: ptr.To[int64](5),
					AutomountServiceAccountToken:  ptr.To(false),
					EnableServiceLinks:            ptr.To(false),
					Containers: []corev1.Container{{
						Name:            "netexec",
						Image:           image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Args:            []string{"netexec", "--http-port=" + strconv.Itoa(httpPort), "--udp-port=" + strconv.Itoa(udpPort)},
						Ports: []corev1.ContainerPort{
							{Name: "http", ContainerPort: httpPort, Protocol: corev1.ProtocolTCP},
							{Name: "udp", ContainerPort: udpPort, Protocol: corev1.ProtocolUDP},
						},
						// /readyz answers once the UDP server is up too.
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(httpPort)}},
							PeriodSeconds:    2,
							FailureThreshold: 3,
						},
					}},
				},
			},
		},
	}
}

// BackendService is the dual-stack NodePort Service in front of the backends: port 80
// over TCP (to 8080) and UDP (to 8081).
func BackendService(namespace string) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: BackendName, Namespace: namespace},
		Spec: corev1.ServiceSpec{
			Type:           corev1.ServiceTypeNodePort,
			IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicyPreferDualStack),
			Selector:       map[string]string{nameLabel: backendApp},
			Ports: []corev1.ServicePort{
				{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: servicePort, TargetPort: intstr.FromInt32(httpPort)},
				{Name: "udp", Protocol: corev1.ProtocolUDP, Port: servicePort, TargetPort: intstr.FromInt32(udpPort)},
			},
		},
	}
}

// ProberDaemonSet runs kproxy-prober on every node, probing targets.
func ProberDaemonSet(namespace, image string, targets []prober.Target, rate float64, timeout time.Duration) *appsv1.DaemonSet {
	labels := map[string]string{nameLabel: proberApp}
	args := []string{"run", "--name=$(NODE_NAME)", "--listen=" + proberListen,
		"--rate=" + strconv.FormatFloat(rate, 'g', -1, 64), "--timeout=" + timeout.String()}
	for _, t := range targets {
		args = append(args, "--target="+t.String())
	}
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: ProberName, Namespace: namespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](5),
					AutomountServiceAccountToken:  ptr.To(false),
					EnableServiceLinks:            ptr.To(false),
					Containers: []corev1.Container{{
						Name:            "prober",
						Image:           image,
						ImagePullPolicy: corev1.PullNever,
						Args:            args,
						Env: []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"},
						}}},
					}},
				},
			},
		},
	}
}

// ToYAML renders objects as one multi-document YAML stream, for `kubectl apply -f -`.
func ToYAML(objs ...runtime.Object) ([]byte, error) {
	var b bytes.Buffer
	for _, o := range objs {
		y, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("yaml of %T: %w", o, err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes(), nil
}
