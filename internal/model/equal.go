package model

import "slices"

// portListsEqual compares two conversions of a Service, ignoring port order.
func portListsEqual(a, b []*ServicePort) bool {
	if len(a) != len(b) {
		return false
	}
	for _, pa := range a {
		found := false
		for _, pb := range b {
			if pa.Name == pb.Name {
				if !servicePortsEqual(pa, pb) {
					return false
				}
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func servicePortsEqual(a, b *ServicePort) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return a.Name == b.Name &&
		a.ClusterIP == b.ClusterIP &&
		a.Port == b.Port &&
		a.Protocol == b.Protocol &&
		a.NodePort == b.NodePort &&
		a.TargetPortName == b.TargetPortName &&
		slices.Equal(a.ExternalIPs, b.ExternalIPs) &&
		slices.Equal(a.LoadBalancerVIPs, b.LoadBalancerVIPs) &&
		slices.Equal(a.LoadBalancerSourceRanges, b.LoadBalancerSourceRanges) &&
		a.StickyMaxAgeSeconds == b.StickyMaxAgeSeconds &&
		a.ExternalPolicyLocal == b.ExternalPolicyLocal &&
		a.InternalPolicyLocal == b.InternalPolicyLocal &&
		a.HealthCheckNodePort == b.HealthCheckNodePort &&
		a.TrafficDistribution == b.TrafficDistribution
}

func endpointsEqual(a, b *Endpoint) bool {
	if a == b {
		return true
	}
	return a.IP == b.IP && a.Port == b.Port &&
		a.Ready == b.Ready && a.Serving == b.Serving && a.Terminating == b.Terminating &&
		a.NodeName() == b.NodeName() && a.Zone() == b.Zone() && a.IsLocal == b.IsLocal &&
		slices.Equal(a.ZoneHints(), b.ZoneHints()) && slices.Equal(a.NodeHints(), b.NodeHints())
}

func endpointListsEqual(a, b []*Endpoint) bool {
	// nil and empty differ in a view: nil means "policy unused".
	if (a == nil) != (b == nil) {
		return false
	}
	return slices.EqualFunc(a, b, endpointsEqual)
}

// viewsEqual reports whether two views would program the same rules.
func viewsEqual(a, b *ServicePortView) bool {
	return servicePortsEqual(a.ServicePort, b.ServicePort) &&
		a.HasAnyEndpoints == b.HasAnyEndpoints &&
		endpointListsEqual(a.ClusterEndpoints, b.ClusterEndpoints) &&
		endpointListsEqual(a.LocalEndpoints, b.LocalEndpoints) &&
		endpointListsEqual(a.AllReachableEndpoints, b.AllReachableEndpoints)
}
