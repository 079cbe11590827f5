package inspect

import (
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
	"github.com/kproxy/kproxy/internal/model"
)

// The ways a destination can be a ServicePort (LookupMatch.As).
const (
	AsClusterIP      = "ClusterIP"
	AsExternalIP     = "ExternalIP"
	AsLoadBalancerIP = "LoadBalancerIP"
	AsNodePort       = "NodePort"
)

// BuildLookup returns the ServicePorts the destination ip:port of protocol is, in
// every family of ip's: as a ClusterIP, an externalIP, a load-balancer IP, or a
// NodePort on one of the NodePort addresses the proxier last wrote with (any
// address when they are "all"; loopback too, where the mode serves localhost
// NodePorts). Each match is explained as BuildService explains the port. It walks
// the model once, under State.Inspect.
func BuildLookup(families []Family, ip netip.Addr, port int32, protocol v1.Protocol) *Lookup {
	ip = ip.Unmap()
	out := &Lookup{
		APIVersion: APIVersion, Kind: "Lookup",
		IP: ip.String(), Port: port, Protocol: string(protocol), Matches: []LookupMatch{},
	}
	for i := range families {
		f := &families[i]
		if (f.State.Family() == v1.IPv6Protocol) != ip.Is6() {
			continue
		}
		pub := f.published()
		if pub != nil {
			for _, cidr := range pub.ServiceCIDRs {
				if cidr.Contains(ip) {
					out.ServiceCIDR = cidr.String()
				}
			}
		}
		st := f.State
		st.Inspect(func() {
			for _, name := range st.ServicePortNames() {
				view := st.View(name)
				as := matchAs(view.ServicePort, pub, ip, port, protocol)
				if as == "" {
					continue
				}
				out.Matches = append(out.Matches, LookupMatch{
					Namespace: name.Namespace, Name: name.Name, As: as,
					Port: explainPort(st, view, pub),
				})
			}
		})
	}
	return out
}

// matchAs says how ip:port of protocol reaches sp ("" when it does not).
func matchAs(sp *model.ServicePort, pub *proxycore.Published, ip netip.Addr, port int32, protocol v1.Protocol) string {
	if !strings.EqualFold(string(sp.Protocol), string(protocol)) {
		return ""
	}
	switch {
	case sp.Port == port && sp.ClusterIP == ip:
		return AsClusterIP
	case sp.Port == port && slices.Contains(sp.ExternalIPs, ip):
		return AsExternalIP
	case sp.Port == port && slices.Contains(sp.LoadBalancerVIPs, ip):
		return AsLoadBalancerIP
	case sp.NodePort != 0 && sp.NodePort == port && servesNodePorts(pub, ip):
		return AsNodePort
	}
	return ""
}

// servesNodePorts reports whether NodePorts may be reached on ip. Without a
// published sync it cannot say, and answers yes: the trace of the kernel's rules
// decides anyway.
func servesNodePorts(pub *proxycore.Published, ip netip.Addr) bool {
	if pub == nil || pub.NodePortAddresses.All || ip.IsLoopback() {
		return true
	}
	return slices.Contains(pub.NodePortAddresses.IPs, ip)
}
