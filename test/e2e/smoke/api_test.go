package smoke

import (
	"context"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kproxy/kproxy/test/lab"
)

func TestServiceAndEndpointSliceSeenByInformer(t *testing.T) {
	l := suite.Lab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	seen := make(chan string, 16)
	factory := informers.NewSharedInformerFactory(l.Client, 0)
	notify := func(kind string) cache.ResourceEventHandler {
		return cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			if m, ok := obj.(metav1.Object); ok && m.GetNamespace() == "default" {
				seen <- kind + "/" + m.GetName()
			}
		}}
	}
	if _, err := factory.Core().V1().Services().Informer().AddEventHandler(notify("service")); err != nil {
		t.Fatal(err)
	}
	if _, err := factory.Discovery().V1().EndpointSlices().Informer().AddEventHandler(notify("slice")); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	defer factory.Shutdown()
	defer close(stop) // before Shutdown, which waits for the informers to stop
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("cache of %v did not sync", typ)
		}
	}

	svc, err := l.CreateService(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke-web"},
		Spec: v1.ServiceSpec{
			IPFamilyPolicy: ptr.To(v1.IPFamilyPolicyRequireDualStack),
			Ports: []v1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(80), Protocol: v1.ProtocolTCP},
				{Name: "dns", Port: 53, TargetPort: intstr.FromInt32(80), Protocol: v1.ProtocolUDP},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.DeleteService(context.Background(), svc); err != nil {
			t.Log(err)
		}
	})
	if len(svc.Spec.ClusterIPs) != 2 {
		t.Fatalf("want dual-stack cluster IPs, got %v", svc.Spec.ClusterIPs)
	}
	for i, fam := range lab.Families {
		ip := netip.MustParseAddr(svc.Spec.ClusterIPs[i])
		if !lab.ServiceCIDRs.Get(fam).Contains(ip) {
			t.Errorf("cluster IP %s not in %s", ip, lab.ServiceCIDRs.Get(fam))
		}
	}
	slices, err := l.SetEndpoints(ctx, svc, lab.PodEndpoints(l.Node1.Pods...), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(slices) != 2 {
		t.Fatalf("want one slice per family, got %d", len(slices))
	}

	want := map[string]bool{"service/smoke-web": true}
	for _, s := range slices {
		want["slice/"+s.Name] = true
	}
	for len(want) > 0 {
		select {
		case key := <-seen:
			delete(want, key)
		case <-ctx.Done():
			t.Fatalf("informers never saw %v", want)
		}
	}

	lister := factory.Discovery().V1().EndpointSlices().Lister()
	got, err := lister.EndpointSlices("default").Get(lab.SliceName("smoke-web", v1.IPv6Protocol, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[discoveryv1.LabelServiceName] != "smoke-web" || got.Labels[discoveryv1.LabelManagedBy] != lab.ControllerName {
		t.Errorf("labels: %v", got.Labels)
	}
	if _, err := time.Parse(time.RFC3339Nano, got.Annotations[v1.EndpointsLastChangeTriggerTime]); err != nil {
		t.Errorf("trigger-time annotation: %v", err)
	}
	if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != svc.UID {
		t.Errorf("owner references: %+v", got.OwnerReferences)
	}
	if len(got.Endpoints) != len(l.Node1.Pods) || *got.Endpoints[0].NodeName != "node1" || *got.Endpoints[0].Zone != "zone-a" {
		t.Errorf("endpoints: %+v", got.Endpoints)
	}

	// Updating in place keeps names and drops the removed endpoints.
	if _, err := l.SetEndpoints(ctx, svc, lab.PodEndpoints(l.Node2.Pods[0]), nil); err != nil {
		t.Fatal(err)
	}
	if err := pollUntil(ctx, func() bool {
		s, err := lister.EndpointSlices("default").Get(lab.SliceName("smoke-web", v1.IPv4Protocol, 0))
		return err == nil && len(s.Endpoints) == 1 && s.Endpoints[0].Addresses[0] == l.Node2.Pods[0].IPs.V4.String()
	}); err != nil {
		t.Fatalf("update not observed: %v", err)
	}
}

func TestNodesRegistered(t *testing.T) {
	l := suite.Lab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range l.Nodes() {
		node, err := l.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var ips []string
		for _, a := range node.Status.Addresses {
			if a.Type == v1.NodeInternalIP {
				ips = append(ips, a.Address)
			}
		}
		if len(ips) != 2 || ips[0] != n.IPs.V4.String() || ips[1] != n.IPs.V6.String() {
			t.Errorf("%s InternalIPs = %v", n.Name, ips)
		}
		if node.Labels[v1.LabelTopologyZone] != n.Zone || len(node.Spec.PodCIDRs) != 2 {
			t.Errorf("%s labels %v podCIDRs %v", n.Name, node.Labels, node.Spec.PodCIDRs)
		}
	}
}

// pollUntil polls cond every 20ms until it holds or ctx ends.
func pollUntil(ctx context.Context, cond func() bool) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}
