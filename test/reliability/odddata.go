package reliability

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kproxy/kproxy/test/lab"
)

// Names at the API's length limits: a namespace and a Service name are DNS-1123 (1035)
// labels of at most 63 characters, a port name an IANA service name of at most 15, an
// EndpointSlice name a DNS-1123 subdomain of at most 253.
var (
	longNamespace = "rel-" + strings.Repeat("n", 59)
	longService   = "s" + strings.Repeat("l", 62)
	longPort      = "p" + strings.Repeat("o", 14)
	longSlice     = strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
)

// OddService is one Service of scenario 5 with the EndpointSlices it gets.
type OddService struct {
	What    string // what is odd about it
	Service *v1.Service
	// Slices builds the slices from the stored Service (with its UID and ClusterIP).
	Slices func(stored *v1.Service) []*discoveryv1.EndpointSlice
	// Answers: a TCP probe to port 80 of its ClusterIP should reach a real pod.
	Answers bool
}

// fakeEndpoints are n ready endpoints at addresses no pod has (10.244.128.0/17, outside
// both nodes' pod CIDRs and bench.Loader's range): programmed, never reached.
func fakeEndpoints(n, offset int) []lab.Endpoint {
	out := make([]lab.Endpoint, n)
	for i := range out {
		k := offset + i
		ip := netip.AddrFrom4([4]byte{10, 244, byte(128 + k/250), byte(k%250 + 1)})
		out[i] = lab.ReadyEndpoint("", "node2", "zone-b", ip)
	}
	return out
}

func tcpPort(name string, port int32) v1.ServicePort {
	return v1.ServicePort{Name: name, Protocol: v1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(port)}
}

func oddSvc(name, ns string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1.ServiceSpec{IPFamilies: []v1.IPFamily{v1.IPv4Protocol}, Ports: ports},
	}
}

func slicesOf(eps []lab.Endpoint, maxPer int) func(*v1.Service) []*discoveryv1.EndpointSlice {
	return func(s *v1.Service) []*discoveryv1.EndpointSlice {
		return lab.BuildEndpointSlices(s, eps, lab.PortsFromService(s), lab.SliceOptions{MaxPerSlice: maxPer})
	}
}

// OddServices lists scenario 5's Services: odd but valid API data.
func (w *World) OddServices() []*OddService {
	pods := lab.PodEndpoints(w.Bulk.Backends...)
	many := make([]v1.ServicePort, 100)
	for i := range many {
		many[i] = tcpPort(fmt.Sprintf("p%d", i), int32(10000+i))
	}
	many[0] = tcpPort("p0", 80)
	return []*OddService{
		{What: "1,000 endpoints in one slice", Service: oddSvc("odd-1000-endpoints", "default", tcpPort("http", 80)),
			Slices: slicesOf(fakeEndpoints(1000, 0), 1000)},
		{What: "one Service split across 50 slices", Service: oddSvc("odd-50-slices", "default", tcpPort("http", 80)),
			Slices: slicesOf(append(fakeEndpoints(490, 1000), pods...), 10)},
		{What: "the same addresses in two slices", Service: oddSvc("odd-duplicates", "default", tcpPort("http", 80)),
			Slices: func(s *v1.Service) []*discoveryv1.EndpointSlice {
				a := slicesOf(pods, 0)(s)
				b := slicesOf(pods, 0)(s)
				for _, sl := range b {
					sl.Name += "-copy"
				}
				return append(a, b...)
			}, Answers: true},
		{What: "100 ports", Service: oddSvc("odd-100-ports", "default", many...), Slices: slicesOf(pods, 0), Answers: true},
		{What: "IPv4, IPv6 and FQDN slices for a single-stack IPv4 Service", Service: oddSvc("odd-mixed-family", "default", tcpPort("http", 80)),
			Slices: func(s *v1.Service) []*discoveryv1.EndpointSlice {
				dual := s.DeepCopy()
				dual.Spec.IPFamilies = lab.Families
				out := slicesOf(pods, 0)(dual)
				fqdn := slicesOf(pods[:1], 0)(s)[0]
				fqdn.Name = s.Name + "-fqdn-0"
				fqdn.AddressType = discoveryv1.AddressTypeFQDN
				fqdn.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"backend.example.com"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}
				return append(out, fqdn)
			}, Answers: true},
		{What: "TCP, UDP and SCTP", Service: oddSvc("odd-protocols", "default",
			tcpPort("tcp", 80),
			v1.ServicePort{Name: "udp", Protocol: v1.ProtocolUDP, Port: 80, TargetPort: intstr.FromInt32(80)},
			v1.ServicePort{Name: "sctp", Protocol: v1.ProtocolSCTP, Port: 80, TargetPort: intstr.FromInt32(80)}),
			Slices: slicesOf(pods, 0), Answers: true},
		{What: "names at the length limits", Service: oddSvc(longService, longNamespace, tcpPort(longPort, 80)),
			Slices: func(s *v1.Service) []*discoveryv1.EndpointSlice {
				out := slicesOf(pods, 0)(s)
				out[0].Name = longSlice
				return out
			}, Answers: true},
	}
}

// CreateOdd creates the odd Services and their slices, and returns the stored
// Services.
func (w *World) CreateOdd(ctx context.Context, odd []*OddService) ([]*v1.Service, error) {
	c := w.Lab.Client
	_, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: longNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace %s: %w", longNamespace, err)
	}
	var out []*v1.Service
	for _, o := range odd {
		svc, err := w.Lab.CreateService(ctx, o.Service)
		if err != nil {
			return out, fmt.Errorf("%s: %w", o.What, err)
		}
		out = append(out, svc)
		for _, sl := range o.Slices(svc) {
			if _, err := c.DiscoveryV1().EndpointSlices(svc.Namespace).Create(ctx, sl, metav1.CreateOptions{}); err != nil {
				return out, fmt.Errorf("%s: create slice %s: %w", o.What, sl.Name, err)
			}
		}
	}
	return out, nil
}

// DeleteOdd deletes the Services and their slices (the namespace stays: no namespace
// controller runs in the lab to finish deleting it).
func (w *World) DeleteOdd(ctx context.Context, svcs []*v1.Service) error {
	for _, s := range svcs {
		if err := w.Lab.DeleteService(ctx, s); err != nil {
			return err
		}
	}
	return nil
}
