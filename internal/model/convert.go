package model

import (
	"fmt"
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ShouldSkipService reports whether kube-proxy ignores the Service entirely: headless
// Services (clusterIP "None"), Services without a cluster IP, and ExternalName Services.
func ShouldSkipService(svc *v1.Service) bool {
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == v1.ClusterIPNone {
		return true
	}
	return svc.Spec.Type == v1.ServiceTypeExternalName
}

// ClusterIPForFamily returns the Service's cluster IP string for the family, or "".
// Services written before dual-stack (no spec.ipFamilies) are matched on the family of
// spec.clusterIP.
func ClusterIPForFamily(svc *v1.Service, family v1.IPFamily) string {
	if len(svc.Spec.IPFamilies) == 0 {
		ip := svc.Spec.ClusterIP
		if ip == "" || ip == v1.ClusterIPNone {
			return ""
		}
		// As upstream: anything that does not look like IPv6 is treated as IPv4.
		if (family == v1.IPv6Protocol) == strings.Contains(ip, ":") {
			return ip
		}
		return ""
	}
	for i, f := range svc.Spec.IPFamilies {
		if f == family && i < len(svc.Spec.ClusterIPs) {
			return svc.Spec.ClusterIPs[i]
		}
	}
	return ""
}

// ExternallyAccessible reports whether the Service accepts traffic from outside the
// cluster by its type (LoadBalancer, NodePort, or ClusterIP with externalIPs).
func ExternallyAccessible(svc *v1.Service) bool {
	switch svc.Spec.Type {
	case v1.ServiceTypeLoadBalancer, v1.ServiceTypeNodePort:
		return true
	case v1.ServiceTypeClusterIP:
		return len(svc.Spec.ExternalIPs) > 0
	}
	return false
}

// ExternalPolicyLocal reports externalTrafficPolicy Local on an externally accessible Service.
func ExternalPolicyLocal(svc *v1.Service) bool {
	return ExternallyAccessible(svc) && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
}

// InternalPolicyLocal reports internalTrafficPolicy Local.
func InternalPolicyLocal(svc *v1.Service) bool {
	p := svc.Spec.InternalTrafficPolicy
	return p != nil && *p == v1.ServiceInternalTrafficPolicyLocal
}

// NeedsHealthCheck reports whether the Service needs a health check node port: a
// LoadBalancer with externalTrafficPolicy Local.
func NeedsHealthCheck(svc *v1.Service) bool {
	return svc.Spec.Type == v1.ServiceTypeLoadBalancer && ExternalPolicyLocal(svc)
}

// IsVIPMode reports whether a load balancer ingress point delivers traffic with the VIP
// as destination (ipMode VIP, or unset), so that the proxy must handle that VIP.
func IsVIPMode(ing v1.LoadBalancerIngress) bool {
	return ing.IPMode == nil || *ing.IPMode == v1.LoadBalancerIPModeVIP
}

// ServicePortsForFamily converts a Service into its ServicePorts for one IP family, in
// spec order. It returns nil when kube-proxy ignores the Service in that family (see
// ShouldSkipService, or no cluster IP of the family). Bad data is skipped as upstream
// skips it and reported in the returned errors; it never panics.
func ServicePortsForFamily(svc *v1.Service, family v1.IPFamily) ([]*ServicePort, []*DataError) {
	if svc == nil || ShouldSkipService(svc) {
		return nil, nil
	}
	clusterIPStr := ClusterIPForFamily(svc, family)
	if clusterIPStr == "" {
		return nil, nil
	}
	var problems []*DataError
	clusterIP, ok := parseAddr(clusterIPStr)
	if !ok || familyOf(clusterIP) != family {
		problems = append(problems, serviceError(svc, "spec.clusterIPs", clusterIPStr,
			fmt.Sprintf("not a valid %s address; Service ignored in this family", family)))
		return nil, problems
	}

	common := ServicePort{
		ClusterIP:           clusterIP,
		ExternalPolicyLocal: ExternalPolicyLocal(svc),
		InternalPolicyLocal: InternalPolicyLocal(svc),
	}
	if svc.Spec.TrafficDistribution != nil {
		common.TrafficDistribution = *svc.Spec.TrafficDistribution
	}
	common.StickyMaxAgeSeconds, problems = stickyMaxAge(svc, problems)
	common.ExternalIPs, problems = externalIPs(svc, family, problems)
	common.LoadBalancerSourceRanges, problems = sourceRanges(svc, family, problems)
	common.LoadBalancerVIPs, problems = loadBalancerVIPs(svc, family, problems)
	if NeedsHealthCheck(svc) {
		switch hc := svc.Spec.HealthCheckNodePort; {
		case hc == 0:
			problems = append(problems, serviceError(svc, "spec.healthCheckNodePort", "",
				"LoadBalancer Service with externalTrafficPolicy Local has no health check node port"))
		case hc < 0 || hc > 65535:
			problems = append(problems, serviceError(svc, "spec.healthCheckNodePort", fmt.Sprint(hc),
				"out of range; no health check"))
		default:
			common.HealthCheckNodePort = svc.Spec.HealthCheckNodePort
		}
	}

	name := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	ports := make([]*ServicePort, 0, len(svc.Spec.Ports))
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		// What the API server never lets through would make every mode's rules for
		// the whole node fail to load (a port the kernel cannot hold): skip the port.
		if reason := badServicePort(sp); reason != "" {
			problems = append(problems, serviceError(svc, fmt.Sprintf("spec.ports[%d]", i), sp.Name, reason+"; port ignored"))
			continue
		}
		port := common // the slices are shared: ServicePorts are immutable
		port.Name = ServicePortName{NamespacedName: name, Port: sp.Name, Protocol: sp.Protocol}
		port.Port = sp.Port
		port.Protocol = sp.Protocol
		port.NodePort = sp.NodePort
		if sp.TargetPort.Type == intstr.String {
			port.TargetPortName = sp.TargetPort.StrVal
		}
		ports = append(ports, &port)
	}
	return ports, problems
}

// badServicePort says why a port of a Service cannot be programmed ("" when it
// can): a port number outside 1-65535, a node port outside 0-65535, or a protocol
// other than TCP, UDP and SCTP.
func badServicePort(sp *v1.ServicePort) string {
	switch {
	case sp.Port < 1 || sp.Port > 65535:
		return fmt.Sprintf("port %d out of range", sp.Port)
	case sp.NodePort < 0 || sp.NodePort > 65535:
		return fmt.Sprintf("nodePort %d out of range", sp.NodePort)
	}
	switch sp.Protocol {
	case v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
		return ""
	}
	return fmt.Sprintf("unsupported protocol %q", sp.Protocol)
}

// stickyMaxAge returns the ClientIP affinity timeout. Upstream dereferences
// spec.sessionAffinityConfig.clientIP.timeoutSeconds unchecked; we fall back to the API
// default (10800s) when it is missing or out of range and report it.
func stickyMaxAge(svc *v1.Service, problems []*DataError) (int32, []*DataError) {
	if svc.Spec.SessionAffinity != v1.ServiceAffinityClientIP {
		return 0, problems
	}
	cfg := svc.Spec.SessionAffinityConfig
	if cfg == nil || cfg.ClientIP == nil || cfg.ClientIP.TimeoutSeconds == nil {
		return v1.DefaultClientIPServiceAffinitySeconds, append(problems, serviceError(svc,
			"spec.sessionAffinityConfig.clientIP.timeoutSeconds", "",
			fmt.Sprintf("missing with sessionAffinity ClientIP; using %ds", v1.DefaultClientIPServiceAffinitySeconds)))
	}
	t := *cfg.ClientIP.TimeoutSeconds
	if t <= 0 || t > maxClientIPAffinitySeconds {
		return v1.DefaultClientIPServiceAffinitySeconds, append(problems, serviceError(svc,
			"spec.sessionAffinityConfig.clientIP.timeoutSeconds", fmt.Sprint(t),
			fmt.Sprintf("out of range; using %ds", v1.DefaultClientIPServiceAffinitySeconds)))
	}
	return t, problems
}

func externalIPs(svc *v1.Service, family v1.IPFamily, problems []*DataError) ([]netip.Addr, []*DataError) {
	var out []netip.Addr
	for i, s := range svc.Spec.ExternalIPs {
		addr, ok := parseAddr(s)
		if !ok {
			// Like upstream, blank entries (not validated by the API server) are
			// ignored silently.
			if strings.TrimSpace(s) != "" {
				problems = append(problems, serviceError(svc, fmt.Sprintf("spec.externalIPs[%d]", i), s, "invalid IP ignored"))
			}
			continue
		}
		if familyOf(addr) == family {
			out = append(out, addr)
		}
	}
	return out, problems
}

// sourceRanges returns the family's loadBalancerSourceRanges; a zero-length prefix
// among them means "allow all", represented as no ranges at all.
func sourceRanges(svc *v1.Service, family v1.IPFamily, problems []*DataError) ([]netip.Prefix, []*DataError) {
	var out []netip.Prefix
	allowAll := false
	for i, raw := range svc.Spec.LoadBalancerSourceRanges {
		s := strings.TrimSpace(raw)
		prefix, ok := parsePrefix(s)
		if !ok {
			if s != "" {
				problems = append(problems, serviceError(svc, fmt.Sprintf("spec.loadBalancerSourceRanges[%d]", i), raw, "invalid CIDR ignored"))
			}
			continue
		}
		if familyOf(prefix.Addr()) != family {
			continue
		}
		if prefix.Bits() == 0 {
			allowAll = true
		}
		out = append(out, prefix)
	}
	if allowAll {
		return nil, problems
	}
	return out, problems
}

func loadBalancerVIPs(svc *v1.Service, family v1.IPFamily, problems []*DataError) ([]netip.Addr, []*DataError) {
	var out []netip.Addr
	for i, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP == "" || !IsVIPMode(ing) {
			continue
		}
		addr, ok := parseAddr(ing.IP)
		if !ok {
			problems = append(problems, serviceError(svc, fmt.Sprintf("status.loadBalancer.ingress[%d].ip", i), ing.IP, "invalid IP ignored"))
			continue
		}
		if familyOf(addr) == family {
			out = append(out, addr)
		}
	}
	return out, problems
}

// maxClientIPAffinitySeconds is the API's validation limit for the ClientIP timeout.
const maxClientIPAffinitySeconds = 86400
