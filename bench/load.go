package bench

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kproxy/kproxy/test/lab"
)

// Service kinds by creation index. Only the probed ones need real backends.
const (
	// RealEvery: Services whose index is a multiple have all EndpointsPerService
	// endpoints on real lab pods; the probe sample is drawn from them.
	RealEvery = 20
	// ChurnEvery/ChurnOffset: Services with index%ChurnEvery == ChurnOffset have a
	// single endpoint on a real pod, which the change-latency scenario replaces (a single
	// endpoint makes "the new endpoint answers" observable by one probe).
	ChurnEvery  = 100
	ChurnOffset = 50
	// EndpointsPerService is the endpoint count of every other Service.
	EndpointsPerService = 10
	// ServicePort is the port of every Service and of the backends.
	ServicePort = 80
)

// Svc is a loaded Service.
type Svc struct {
	Index     int
	Name      string
	ClusterIP netip.Addr
	Object    *v1.Service
	Slice     *discoveryv1.EndpointSlice // the stored slice (IPv4, the only family)
	Pod       *lab.Pod                   // churn Services: the current endpoint
}

// IsReal reports whether Service i has real backends only.
func IsReal(i int) bool { return i%RealEvery == 0 }

// IsChurn reports whether Service i is a single-endpoint churn Service.
func IsChurn(i int) bool { return i%ChurnEvery == ChurnOffset }

// Loader creates the benchmark Services and EndpointSlices, incrementally.
type Loader struct {
	Lab      *lab.Lab
	Backends []*lab.Pod // real endpoints (the client pod is not among them)
	Workers  int

	mu   sync.Mutex
	Svcs []*Svc // by index
}

// LoadTo creates Services [len(Svcs), n) with their slices, using Workers concurrent
// writers, and returns how long it took.
func (ld *Loader) LoadTo(ctx context.Context, n int) (time.Duration, error) {
	start := time.Now()
	from := len(ld.Svcs)
	if n <= from {
		return 0, nil
	}
	ld.Svcs = append(ld.Svcs, make([]*Svc, n-from)...)
	g, ctx := errgroup.WithContext(ctx)
	next := make(chan int)
	g.Go(func() error {
		defer close(next)
		for i := from; i < n; i++ {
			select {
			case next <- i:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	for range max(1, ld.Workers) {
		g.Go(func() error {
			for i := range next {
				s, err := ld.create(ctx, i)
				if err != nil {
					return err
				}
				ld.mu.Lock()
				ld.Svcs[i] = s
				ld.mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		ld.Svcs = ld.Svcs[:from]
		return 0, err
	}
	return time.Since(start), nil
}

func (ld *Loader) create(ctx context.Context, i int) (*Svc, error) {
	name := fmt.Sprintf("bench-%05d", i)
	svc, err := ld.Lab.Client.CoreV1().Services(metav1.NamespaceDefault).Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Spec: v1.ServiceSpec{
			Ports: []v1.ServicePort{{Name: "http", Port: ServicePort, TargetPort: intstr.FromInt32(ServicePort), Protocol: v1.ProtocolTCP}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create service %s: %w", name, err)
	}
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		return nil, fmt.Errorf("service %s: cluster IP %q: %w", name, svc.Spec.ClusterIP, err)
	}
	out := &Svc{Index: i, Name: name, ClusterIP: ip, Object: svc}
	var eps []lab.Endpoint
	switch {
	case IsReal(i):
		eps = lab.PodEndpoints(ld.Backends...)
	case IsChurn(i):
		out.Pod = ld.Backends[(i/ChurnEvery)%len(ld.Backends)]
		eps = lab.PodEndpoints(out.Pod)
	default:
		eps = fakeEndpoints(ld.Lab.Node2, i)
	}
	slices := lab.BuildEndpointSlices(svc, eps, lab.PortsFromService(svc), lab.SliceOptions{TriggerTime: time.Now()})
	for _, sl := range slices {
		got, err := ld.Lab.Client.DiscoveryV1().EndpointSlices(svc.Namespace).Create(ctx, sl, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create slice %s: %w", sl.Name, err)
		}
		out.Slice = got
	}
	return out, nil
}

// fakeEndpoints are ready endpoints on node2 at addresses no pod has (10.244.16.0 and
// up, outside both nodes' pod CIDRs and unrouted): they are programmed but never used.
func fakeEndpoints(node *lab.Node, i int) []lab.Endpoint {
	out := make([]lab.Endpoint, EndpointsPerService)
	for j := range out {
		n := i*EndpointsPerService + j
		ip := netip.AddrFrom4([4]byte{10, 244, byte(16 + (n/250)%200), byte(n%250 + 1)})
		out[j] = lab.ReadyEndpoint("", node.Name, node.Zone, ip)
	}
	return out
}

// Sample returns up to k real Services among the first n, evenly spread in creation
// order.
func (ld *Loader) Sample(n, k int) []*Svc {
	var real []*Svc
	for i := 0; i < n && i < len(ld.Svcs); i++ {
		if IsReal(i) {
			real = append(real, ld.Svcs[i])
		}
	}
	if len(real) <= k {
		return real
	}
	out := make([]*Svc, 0, k)
	for j := range k {
		out = append(out, real[j*len(real)/k])
	}
	return out
}

// Churn returns the churn Services among the first n.
func (ld *Loader) Churn(n int) []*Svc {
	var out []*Svc
	for i := 0; i < n && i < len(ld.Svcs); i++ {
		if IsChurn(i) {
			out = append(out, ld.Svcs[i])
		}
	}
	return out
}
