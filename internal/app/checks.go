package app

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/config"
)

func otherFamily(f v1.IPFamily) v1.IPFamily {
	if f == v1.IPv4Protocol {
		return v1.IPv6Protocol
	}
	return v1.IPv4Protocol
}

func familyOfPrefix(s string) (v1.IPFamily, bool) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return "", false
	}
	if p.Addr().Is6() {
		return v1.IPv6Protocol, true
	}
	return v1.IPv4Protocol, true
}

// isDualStackCIDRs reports whether cidrs hold CIDRs of both families.
func isDualStackCIDRs(cidrs []string) bool {
	seen := map[v1.IPFamily]bool{}
	for _, c := range cidrs {
		if f, ok := familyOfPrefix(c); ok {
			seen[f] = true
		}
	}
	return len(seen) == 2
}

// checkBadConfig returns upstream's warnings about nodePortAddresses: unset (NodePorts
// on every local IP), or limiting only some of the families in use.
func checkBadConfig(cfg *config.Config, primary v1.IPFamily, expandedNodePortAddrs, podCIDRs []string) error {
	clusterCIDRs := make([]string, len(cfg.ClusterCIDRs))
	for i, p := range cfg.ClusterCIDRs {
		clusterCIDRs[i] = p.String()
	}
	anyDualStack := isDualStackCIDRs(clusterCIDRs) || isDualStackCIDRs(expandedNodePortAddrs) || isDualStackCIDRs(podCIDRs)

	primaryCount := 0
	for _, c := range expandedNodePortAddrs {
		if f, ok := familyOfPrefix(c); ok && f == primary {
			primaryCount++
		}
	}
	other := otherFamily(primary)
	switch {
	case len(expandedNodePortAddrs) == 0:
		return errors.New("nodePortAddresses is unset; NodePort connections will be accepted on all local IPs. Consider using `--nodeport-addresses primary`")
	case anyDualStack && primaryCount == len(expandedNodePortAddrs):
		return fmt.Errorf("cluster appears to be dual-stack but nodePortAddresses contains only %s addresses; NodePort connections will be accepted on all local %s IPs", primary, other)
	case primaryCount == 0:
		return fmt.Errorf("cluster appears to be %s-primary but nodePortAddresses contains only %s addresses; NodePort connections will be accepted on all local %s IPs", primary, other, primary)
	}
	return nil
}

// checkBadIPConfig returns upstream's IP family mismatch errors, and whether they
// are fatal (a wrong-family clusterCIDR in ClusterCIDR mode on a single-stack node,
// or wrong-family podCIDRs in NodeCIDR mode).
func checkBadIPConfig(cfg *config.Config, primary v1.IPFamily, dualStack bool, podCIDRs []string) (error, bool) {
	var errs []error
	fatal := false
	bad := otherFamily(primary)
	clusterType := string(primary) + "-only"
	if dualStack {
		clusterType = string(primary) + "-primary"
	}
	badVersion := "4"
	if bad == v1.IPv6Protocol {
		badVersion = "6"
	}

	clusterCIDRs := make([]string, len(cfg.ClusterCIDRs))
	for i, p := range cfg.ClusterCIDRs {
		clusterCIDRs[i] = p.String()
	}
	if allOfFamily(clusterCIDRs, bad) {
		errs = append(errs, fmt.Errorf("cluster is %s but clusterCIDRs contains only IPv%s addresses", clusterType, badVersion))
		if cfg.DetectLocalMode == config.LocalModeClusterCIDR && !dualStack {
			fatal = true
		}
	}
	if allOfFamily(podCIDRs, bad) {
		errs = append(errs, fmt.Errorf("cluster is %s but node.spec.podCIDRs contains only IPv%s addresses", clusterType, badVersion))
		if cfg.DetectLocalMode == config.LocalModeNodeCIDR {
			fatal = true
		}
	}
	if !dualStack {
		if bindAddressOfFamily(cfg.HealthzBindAddress, bad) {
			errs = append(errs, fmt.Errorf("cluster is %s but healthzBindAddress is IPv%s", clusterType, badVersion))
		}
		if bindAddressOfFamily(cfg.MetricsBindAddress, bad) {
			errs = append(errs, fmt.Errorf("cluster is %s but metricsBindAddress is IPv%s", clusterType, badVersion))
		}
	}
	return errors.Join(errs...), fatal
}

// allOfFamily reports whether cidrs is non-empty and every entry is of family.
func allOfFamily(cidrs []string, family v1.IPFamily) bool {
	if len(cidrs) == 0 {
		return false
	}
	for _, c := range cidrs {
		if f, ok := familyOfPrefix(c); !ok || f != family {
			return false
		}
	}
	return true
}

// bindAddressOfFamily reports whether "IP:port" has a non-zero IP of family.
func bindAddressOfFamily(hostPort string, family v1.IPFamily) bool {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.IsUnspecified() {
		return false
	}
	return ip.Is6() == (family == v1.IPv6Protocol)
}
