package inspect

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
	"github.com/kproxy/kproxy/internal/drift"
	"github.com/kproxy/kproxy/internal/model"
)

// Family is one IP family as the state API reads it.
type Family struct {
	State *model.State
	// Proxier may be nil (nothing synced yet, or a test without one).
	Proxier proxycore.Inspectable
	// Verify compares the kernel with what the proxier applied; nil when the mode
	// cannot.
	Verify func(context.Context) (*drift.Report, error)
}

// published returns what f's proxier last wrote with, nil when nothing yet.
func (f *Family) published() *proxycore.Published {
	if f.Proxier == nil {
		return nil
	}
	return f.Proxier.Published()
}

// BuildNode returns the node document.
func BuildNode(nodeName, mode string, families []Family) *Node {
	n := &Node{APIVersion: APIVersion, Kind: "Node", NodeName: nodeName, Mode: mode, Families: []NodeFamily{}}
	for i := range families {
		f := &families[i]
		nf := NodeFamily{Family: string(f.State.Family()), Syncs: []Sync{}, NodePortAddresses: []string{}}
		f.State.Inspect(func() {
			nf.Zone = f.State.Zone()
			nf.ServicePorts = f.State.Len()
		})
		nf.LocalDetector.Mode = "None"
		if p := f.published(); p != nil {
			if p.NodePortAddresses.All {
				nf.NodePortAddresses = []string{"all"}
			} else {
				nf.NodePortAddresses = append(nf.NodePortAddresses, texts(p.NodePortAddresses.IPs)...)
			}
			nf.LocalDetector = localDetector(p.LocalDetector)
			nf.ServiceCIDRs = texts(p.ServiceCIDRs)
		}
		if f.Proxier != nil {
			for _, r := range f.Proxier.Syncs() {
				s := Sync{Start: r.Start, Duration: r.Duration.Seconds(), Full: r.Full, Wrote: r.Wrote,
					Changed: r.Changed, Deleted: r.Deleted, Operations: r.Operations}
				if r.Err != nil {
					s.Error = r.Err.Error()
				}
				nf.Syncs = append(nf.Syncs, s)
			}
			nf.LastDriftCheck = f.Proxier.LastDrift()
		}
		n.Families = append(n.Families, nf)
	}
	return n
}

func localDetector(d model.LocalDetector) LocalDetector {
	out := LocalDetector{Mode: string(d.Mode), CIDRs: texts(d.CIDRs)}
	switch d.Mode {
	case model.DetectNone:
		out.Mode = "None"
	case model.DetectBridgeInterface:
		out.Interface = d.BridgeInterface
	case model.DetectInterfaceNamePrefix:
		out.Interface = d.InterfaceNamePrefix
	}
	return out
}

// Page limits of BuildServiceList.
const (
	DefaultLimit = 500
	MaxLimit     = 5000
)

// BuildServiceList returns the Services (in namespace, when not empty) whose
// "namespace/name" sorts after the continue token after, at most limit of them
// (DefaultLimit when 0, at most MaxLimit).
func BuildServiceList(families []Family, namespace, after string, limit int) *ServiceList {
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	var ports []PortSummary
	var owners []types.NamespacedName
	for i := range families {
		st := families[i].State
		st.Inspect(func() {
			for _, name := range st.ServicePortNames() {
				if namespace != "" && name.Namespace != namespace {
					continue
				}
				if after != "" && name.NamespacedName.String() <= after {
					continue
				}
				view := st.View(name)
				ports = append(ports, PortSummary{
					PortID:    portOf(st, view.ServicePort),
					Endpoints: len(st.Endpoints(name)), Usable: len(view.AllReachableEndpoints),
				})
				owners = append(owners, name.NamespacedName)
			}
		})
	}
	// Group by Service in name order; within a Service, by family, then port name.
	order := make([]int, len(ports))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(owners[a].String(), owners[b].String()),
			cmp.Compare(ports[a].Family, ports[b].Family), cmp.Compare(ports[a].Name, ports[b].Name))
	})
	list := &ServiceList{APIVersion: APIVersion, Kind: "ServiceList", Items: []ServiceSummary{}}
	for _, i := range order {
		owner := owners[i]
		if n := len(list.Items); n == 0 || list.Items[n-1].Namespace != owner.Namespace || list.Items[n-1].Name != owner.Name {
			if n == limit {
				list.Continue = list.Items[n-1].Namespace + "/" + list.Items[n-1].Name
				break
			}
			list.Items = append(list.Items, ServiceSummary{Namespace: owner.Namespace, Name: owner.Name})
		}
		item := &list.Items[len(list.Items)-1]
		item.Ports = append(item.Ports, ports[i])
	}
	return list
}

// BuildService explains the Service name: every port of every family, or only the
// ports named port or numbered port when port is not empty. It reports false when
// the proxy has no such Service (or port).
func BuildService(families []Family, name types.NamespacedName, port string) (*Service, bool) {
	svc := &Service{APIVersion: APIVersion, Kind: "Service", Namespace: name.Namespace, Name: name.Name, Ports: []ServicePort{}}
	for i := range families {
		f := &families[i]
		pub := f.published()
		st := f.State
		st.Inspect(func() {
			// ServicePortNames is sorted; this Service's ports are contiguous.
			names := st.ServicePortNames()
			start, _ := slices.BinarySearchFunc(names, name, func(n model.ServicePortName, target types.NamespacedName) int {
				return cmp.Or(cmp.Compare(n.Namespace, target.Namespace), cmp.Compare(n.Name, target.Name))
			})
			for _, spn := range names[start:] {
				if spn.NamespacedName != name {
					break
				}
				view := st.View(spn)
				if port != "" && port != spn.Port && port != strconv.Itoa(int(view.Port)) {
					continue
				}
				svc.Ports = append(svc.Ports, explainPort(st, view, pub))
			}
		})
	}
	return svc, len(svc.Ports) > 0
}

// explainPort explains one committed view; it runs under State.Inspect.
func explainPort(st *model.State, view *model.ServicePortView, pub *proxycore.Published) ServicePort {
	sp := view.ServicePort
	out := ServicePort{
		PortID:      portOf(st, sp),
		ExternalIPs: texts(sp.ExternalIPs), LoadBalancerIPs: texts(sp.LoadBalancerVIPs),
		LoadBalancerSourceRanges: texts(sp.LoadBalancerSourceRanges),
		InternalTrafficPolicy:    policy(sp.InternalPolicyLocal),
		HealthCheckNodePort:      sp.HealthCheckNodePort, TrafficDistribution: sp.TrafficDistribution,
		SessionAffinitySeconds: sp.StickyMaxAgeSeconds,
		Endpoints:              []Endpoint{}, KernelObjects: []string{},
	}
	r := model.DecideRouting(sp, view.HasAnyEndpoints, len(view.ClusterEndpoints), len(view.LocalEndpoints))
	out.Internal = traffic(view, r.InternalServed, r.InternalLocal, r.RejectUnserved)
	if sp.ExternallyAccessible() {
		out.ExternalTrafficPolicy = policy(sp.ExternalPolicyLocal)
		ext := traffic(view, r.ExternalServed, r.ExternalLocal, r.RejectUnserved)
		ext.Masquerade = r.ExternalServed && r.MasqueradeExternal
		ext.ShortCircuit = r.ShortCircuitLocal
		out.External = &ext
	}
	endpoints := st.Endpoints(sp.Name)
	for _, use := range model.ExplainEndpoints(view, endpoints, st.NodeName(), st.Zone()) {
		ep := use.Endpoint
		out.Endpoints = append(out.Endpoints, Endpoint{
			Address: ep.String(), NodeName: ep.NodeName(), Zone: ep.Zone(),
			Ready: ep.Ready, Serving: ep.Serving, Terminating: ep.Terminating, IsLocal: ep.IsLocal,
			ZoneHints: ep.ZoneHints(), NodeHints: ep.NodeHints(),
			ClusterSelection: usage(use.Cluster), LocalSelection: usage(use.Local),
			Internal: usage(use.Internal), External: usage(use.External), ExternalFromNode: usage(use.ExternalFromNode),
		})
	}
	if pub != nil && pub.Describe != nil {
		out.KernelObjects = append(out.KernelObjects, pub.Describe(view)...)
	}
	return out
}

func portOf(st *model.State, sp *model.ServicePort) PortID {
	return PortID{
		Family: string(st.Family()), Name: sp.Name.Port, Protocol: string(sp.Protocol), Port: sp.Port,
		ClusterIP: sp.ClusterIP.String(), NodePort: sp.NodePort,
	}
}

// traffic is how one kind of traffic is handled: forwarded to the Local or Cluster
// selection when served, else rejected or dropped.
func traffic(view *model.ServicePortView, served, local, reject bool) Traffic {
	t := Traffic{Selection: "Cluster"}
	list := view.ClusterEndpoints
	if local {
		t.Selection, list = "Local", view.LocalEndpoints
	}
	switch {
	case served:
		t.Verdict = VerdictForward
		for _, ep := range list {
			t.Endpoints = append(t.Endpoints, ep.String())
		}
	case reject:
		t.Verdict = VerdictReject
	default:
		t.Verdict = VerdictDrop
	}
	return t
}

func policy(local bool) string {
	if local {
		return string(v1.ServiceInternalTrafficPolicyLocal)
	}
	return string(v1.ServiceInternalTrafficPolicyCluster)
}

func usage(e model.Exclusion) string {
	if e == model.Selected {
		return Used
	}
	return string(e)
}

func texts[T fmt.Stringer](in []T) []string {
	if len(in) == 0 {
		return nil
	}
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = v.String()
	}
	return out
}
