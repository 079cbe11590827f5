package nftables

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
	"github.com/kproxy/kproxy/internal/model"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// BenchmarkRetainedMemory10k reports what the proxy keeps in memory for 10,000
// Services x 10 endpoints once a full sync has been written: the model and the
// rendered state (the informer caches hold the API objects besides). Peak RSS at
// that scale is about the live heap plus the collector's headroom, so these figures
// bound it (docs/nftables.md, "Memory").
//
// churned-MB is the model and the rendered state again after every Service but one
// has changed once (an endpoint's readiness flipped), committed in partial syncs of
// 50 changes: what a node keeps under churn. It stays near model-MB + rendered-MB
// when a replaced fragment is let go of (TestReplacedFragmentIsCollected); when the
// full sync's fragments shared one array, the one Service left unchanged kept every
// replaced fragment alive, and it was their sum plus the rendered state again.
func BenchmarkRetainedMemory10k(b *testing.B) {
	const services, endpoints = 10000, 10
	svcs, epSlices := scaleObjects(services, endpoints)
	cfg := testRenderConfig()
	var modelMB, renderMB, churnedMB float64
	for b.Loop() {
		before := liveHeapMB()
		st := modelOf(b, svcs, epSlices)
		withModel := liveHeapMB()
		rs := renderFull(&cfg, st)
		for op := range render.FullOps(rs) {
			_ = op
		}
		withRender := liveHeapMB()
		churnAllButOne(b, st, rs, &cfg, epSlices)
		churned := liveHeapMB()
		modelMB, renderMB, churnedMB = withModel-before, withRender-withModel, churned-before
		runtime.KeepAlive(st)
		runtime.KeepAlive(rs)
	}
	b.ReportMetric(modelMB, "model-MB")
	b.ReportMetric(renderMB, "rendered-MB")
	b.ReportMetric(churnedMB, "churned-MB")
}

// churnAllButOne flips the readiness of the first endpoint of every EndpointSlice
// but the last, and applies the changes to the model and to rs as partial syncs of
// 50 changes do.
func churnAllButOne(b *testing.B, st *model.State, rs *render.State, cfg *render.Config, epSlices []*discovery.EndpointSlice) {
	b.Helper()
	const perSync = 50
	for lo := 0; lo < len(epSlices)-1; lo += perSync {
		for i := lo; i < min(lo+perSync, len(epSlices)-1); i++ {
			old := epSlices[i]
			changed := old.DeepCopy()
			changed.Endpoints[0].Conditions.Ready = new(!*old.Endpoints[0].Conditions.Ready)
			st.UpdateEndpointSlice(old, changed)
		}
		upd := st.Commit()
		if len(upd.Changed) == 0 {
			b.Fatalf("changing slices %d and on changed no ServicePort", lo)
		}
		updates := proxycore.RenderChanged(st, upd, func(v *model.ServicePortView) render.Fragment {
			return render.RenderService(cfg, v)
		})
		rs.Commit(rs.Plan(nil, updates, render.PlanOptions{}))
	}
}

func collectViews(st *model.State) []*model.ServicePortView { return slices.Collect(st.Views()) }

// modelOf is a model holding svcs and their epSlices (one slice per Service, in
// order), committed as the initial sync commits it.
func modelOf(b *testing.B, svcs []*v1.Service, epSlices []*discovery.EndpointSlice) *model.State {
	b.Helper()
	st := model.NewState(v1.IPv4Protocol, testNodeName)
	for i := range svcs {
		st.OnServiceAdd(svcs[i])
		st.AddEndpointSlice(epSlices[i])
	}
	if upd := st.Commit(); len(upd.Changed) != len(svcs) {
		b.Fatalf("committed %d ServicePorts, want %d", len(upd.Changed), len(svcs))
	}
	return st
}

// renderFull renders every Service of st as a full sync does.
func renderFull(cfg *render.Config, st *model.State) *render.State {
	base := render.RenderBase(cfg)
	return render.NewState(&base, render.RenderServices(cfg, collectViews(st)))
}

// liveHeapMB is the heap in use after a complete collection.
func liveHeapMB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / 1e6
}

// scaleObjects returns n ClusterIP Services with one port and, for each, one
// EndpointSlice of eps ready endpoints on another node, as decoded from the API
// (every string and pointer its own allocation).
func scaleObjects(n, eps int) ([]*v1.Service, []*discovery.EndpointSlice) {
	svcs := make([]*v1.Service, n)
	epSlices := make([]*discovery.EndpointSlice, n)
	for i := range n {
		name := fmt.Sprintf("svc-%05d", i)
		ip := fmt.Sprintf("172.30.%d.%d", i/250, i%250+1)
		svcs[i] = &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: strings.Clone("bench"), Name: name},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip}, IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
				Ports: []v1.ServicePort{{Name: strings.Clone("http"), Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}}},
		}
		list := make([]discovery.Endpoint, eps)
		for j := range eps {
			k := i*eps + j
			list[j] = discovery.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 100+k/65536, (k/256)%256, k%256)},
				Conditions: discovery.EndpointConditions{Ready: new(true), Serving: new(true), Terminating: new(false)},
				NodeName:   new(strings.Clone("node-b")),
				Zone:       new(strings.Clone("zone-b")),
			}
		}
		epSlices[i] = &discovery.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: strings.Clone("bench"), Name: name + "-abcde", Labels: map[string]string{discovery.LabelServiceName: name}},
			AddressType: discovery.AddressTypeIPv4,
			Endpoints:   list,
			Ports:       []discovery.EndpointPort{{Name: new(strings.Clone("http")), Port: new(int32(8080)), Protocol: new(v1.ProtocolTCP)}},
		}
	}
	return svcs, epSlices
}
