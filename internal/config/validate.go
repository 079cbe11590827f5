package config

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/blang/semver/v4"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/featuregate"
	metricsapi "k8s.io/component-base/metrics/api/v1"
	netutils "k8s.io/utils/net"
)

// validate checks s the way upstream's validation.Validate does, with the same
// field paths (named after upstream's internal type) and messages. fg must
// already hold s.FeatureGates.
func validate(s *settings, fg featuregate.FeatureGate) field.ErrorList {
	var errs field.ErrorList
	root := field.NewPath("KubeProxyConfiguration")

	errs = append(errs, validateMasqueradeBit(s.IPTables.MasqueradeBit, root.Child("KubeProxyIPTablesConfiguration", "MasqueradeBit"))...)
	switch s.Mode {
	case ProxyModeIPVS:
		errs = append(errs, validateIPVS(&s.IPVS, root.Child("KubeProxyIPVSConfiguration"))...)
	case ProxyModeNFTables:
		errs = append(errs, validateMasqueradeBit(s.NFTables.MasqueradeBit, root.Child("KubeProxyNFTablesConfiguration", "MasqueradeBit"))...)
	}
	errs = append(errs, validateLinux(&s.Linux, root.Child("KubeProxyLinuxConfiguration"))...)
	errs = append(errs, validateProxyMode(s.Mode, fg, root.Child("Mode"))...)
	if s.ClientConnection.Burst < 0 {
		errs = append(errs, field.Invalid(root.Child("ClientConnection", "Burst"), int64(s.ClientConnection.Burst), "must be greater than or equal to 0"))
	}

	if s.ConfigSyncPeriod.Duration <= 0 {
		errs = append(errs, field.Invalid(root.Child("ConfigSyncPeriod"), s.ConfigSyncPeriod, "must be greater than 0"))
	}
	if s.SyncPeriod.Duration <= 0 {
		errs = append(errs, field.Invalid(root.Child("SyncPeriod"), s.SyncPeriod, "must be greater than 0"))
	}
	if s.MinSyncPeriod.Duration < 0 {
		errs = append(errs, field.Invalid(root.Child("MinSyncPeriod"), s.MinSyncPeriod, "must be greater than or equal to 0"))
	}
	if s.MinSyncPeriod.Duration > s.SyncPeriod.Duration {
		errs = append(errs, field.Invalid(root.Child("SyncPeriod"), s.MinSyncPeriod,
			fmt.Sprintf("must be greater than or equal to %s", root.Child("MinSyncPeriod"))))
	}

	if netutils.ParseIPSloppy(s.BindAddress) == nil {
		errs = append(errs, field.Invalid(root.Child("BindAddress"), s.BindAddress, "not a valid textual representation of an IP address"))
	}
	if s.HealthzBindAddress != "" {
		errs = append(errs, validateHostPort(s.HealthzBindAddress, root.Child("HealthzBindAddress"))...)
	}
	errs = append(errs, validateHostPort(s.MetricsBindAddress, root.Child("MetricsBindAddress"))...)
	errs = append(errs, validateNodePortAddresses(s.NodePortAddresses, root.Child("NodePortAddresses"))...)
	errs = append(errs, validateShowHiddenMetricsVersion(s.ShowHiddenMetricsForVersion, root.Child("ShowHiddenMetricsForVersion"))...)
	errs = append(errs, validateDetectLocalMode(s.DetectLocalMode, root.Child("DetectLocalMode"))...)
	errs = append(errs, validateDetectLocal(s.DetectLocalMode, &s.DetectLocal, root.Child("DetectLocalConfiguration"))...)
	// The logging block is validated when the command applies it, as upstream
	// ("initialize logging: logging.format: ...").
	return errs
}

// validateRunnable refuses a valid upstream mode that this build cannot run.
func validateRunnable(mode ProxyMode, runnable []ProxyMode) field.ErrorList {
	if slices.Contains(runnable, mode) {
		return nil
	}
	names := make([]string, len(runnable))
	for i, m := range runnable {
		names[i] = string(m)
	}
	slices.Sort(names)
	return field.ErrorList{field.Invalid(field.NewPath("KubeProxyConfiguration", "Mode", "ProxyMode"), string(mode),
		fmt.Sprintf("proxy mode %q is not implemented by this build of kube-proxy (kproxy); use one of: %s", mode, strings.Join(names, ", ")))}
}

func validateMasqueradeBit(bit *int32, path *field.Path) field.ErrorList {
	if bit != nil && (*bit < 0 || *bit > 31) {
		return field.ErrorList{field.Invalid(path, bit, "must be within the range [0, 31]")}
	}
	return nil
}

func validateIPVS(c *ipvsSettings, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.TCPTimeout.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("TCPTimeout"), c.TCPTimeout, "must be greater than or equal to 0"))
	}
	if c.TCPFinTimeout.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("TCPFinTimeout"), c.TCPFinTimeout, "must be greater than or equal to 0"))
	}
	if c.UDPTimeout.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("UDPTimeout"), c.UDPTimeout, "must be greater than or equal to 0"))
	}
	for i, cidr := range c.ExcludeCIDRs {
		if _, _, err := netutils.ParseCIDRSloppy(cidr); err != nil {
			errs = append(errs, field.Invalid(path.Child("ExcludeCidrs").Index(i), cidr, "must be a valid CIDR"))
		}
	}
	return errs
}

func validateLinux(c *linuxSettings, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	ct, ctPath := &c.Conntrack, path.Child("KubeProxyConntrackConfiguration")
	if ct.MaxPerCore != nil && *ct.MaxPerCore < 0 {
		errs = append(errs, field.Invalid(ctPath.Child("MaxPerCore"), ct.MaxPerCore, "must be greater than or equal to 0"))
	}
	if ct.Min != nil && *ct.Min < 0 {
		errs = append(errs, field.Invalid(ctPath.Child("Min"), ct.Min, "must be greater than or equal to 0"))
	}
	if ct.TCPEstablishedTimeout != nil && ct.TCPEstablishedTimeout.Duration < 0 {
		errs = append(errs, field.Invalid(ctPath.Child("TCPEstablishedTimeout"), ct.TCPEstablishedTimeout, "must be greater than or equal to 0"))
	}
	if ct.TCPCloseWaitTimeout != nil && ct.TCPCloseWaitTimeout.Duration < 0 {
		errs = append(errs, field.Invalid(ctPath.Child("TCPCloseWaitTimeout"), ct.TCPCloseWaitTimeout, "must be greater than or equal to 0"))
	}
	if ct.UDPTimeout.Duration < 0 {
		errs = append(errs, field.Invalid(ctPath.Child("UDPTimeout"), ct.UDPTimeout, "must be greater than or equal to 0"))
	}
	if ct.UDPStreamTimeout.Duration < 0 {
		errs = append(errs, field.Invalid(ctPath.Child("UDPStreamTimeout"), ct.UDPStreamTimeout, "must be greater than or equal to 0"))
	}
	if c.OOMScoreAdj != nil && (*c.OOMScoreAdj < -1000 || *c.OOMScoreAdj > 1000) {
		errs = append(errs, field.Invalid(path.Child("OOMScoreAdj"), *c.OOMScoreAdj, "must be within the range [-1000, 1000]"))
	}
	return errs
}

func validateProxyMode(mode ProxyMode, fg featuregate.FeatureGate, path *field.Path) field.ErrorList {
	valid := []string{string(ProxyModeIPTables), string(ProxyModeNFTables)}
	if fg.Enabled(KubeProxyIPVS) {
		valid = append(valid, string(ProxyModeIPVS))
	}
	slices.Sort(valid)
	if mode == "" || slices.Contains(valid, string(mode)) {
		return nil
	}
	msg := fmt.Sprintf("must be %s or blank (blank means the best-available proxy [currently %s])", strings.Join(valid, ", "), DefaultProxyMode)
	return field.ErrorList{field.Invalid(path.Child("ProxyMode"), string(mode), msg)}
}

func validateDetectLocalMode(mode LocalMode, path *field.Path) field.ErrorList {
	valid := []string{string(LocalModeClusterCIDR), string(LocalModeNodeCIDR), string(LocalModeBridgeInterface), string(LocalModeInterfaceNamePrefix), ""}
	if slices.Contains(valid, string(mode)) {
		return nil
	}
	return field.ErrorList{field.NotSupported(path, string(mode), valid)}
}

func validateHostPort(input string, path *field.Path) field.ErrorList {
	host, port, err := net.SplitHostPort(input)
	if err != nil {
		return field.ErrorList{field.Invalid(path, input, "must be IP:port")}
	}
	var errs field.ErrorList
	if netutils.ParseIPSloppy(host) == nil {
		errs = append(errs, field.Invalid(path, host, "must be a valid IP"))
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		errs = append(errs, field.Invalid(path, port, "must be a valid port"))
	}
	return errs
}

func validateNodePortAddresses(addrs []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, a := range addrs {
		switch a {
		case NodePortAddressesPrimary, NodePortAddressesLocalhost, NodePortAddressesAll:
			if seen[a] {
				errs = append(errs, field.Duplicate(path.Index(i), a))
			}
			seen[a] = true
			continue
		}
		if _, _, err := netutils.ParseCIDRSloppy(a); err != nil {
			errs = append(errs, field.Invalid(path.Index(i), a, "must be a valid CIDR or one of the keywords 'primary', 'localhost', 'all'"))
		}
	}
	return errs
}

// validateShowHiddenMetricsVersion allows only the previous minor version of
// the emulated Kubernetes release, as upstream (which uses its own binary version).
func validateShowHiddenMetricsVersion(v string, path *field.Path) field.ErrorList {
	current := semver.Version{Major: uint64(emulatedKubernetesVersion.Major()), Minor: uint64(emulatedKubernetesVersion.Minor())}
	if err := metricsapi.ValidateShowHiddenMetricsVersionForKubeletBackwardCompatOnly(current, v); err != nil {
		return field.ErrorList{field.Invalid(path, v, err.Error())}
	}
	return nil
}

func validateDetectLocal(mode LocalMode, c *detectLocalSettings, path *field.Path) field.ErrorList {
	switch mode {
	case LocalModeBridgeInterface:
		if c.BridgeInterface == "" {
			return field.ErrorList{field.Invalid(path.Child("InterfaceName"), c.BridgeInterface, "must not be empty")}
		}
	case LocalModeInterfaceNamePrefix:
		if c.InterfaceNamePrefix == "" {
			return field.ErrorList{field.Invalid(path.Child("InterfacePrefix"), c.InterfaceNamePrefix, "must not be empty")}
		}
	case LocalModeClusterCIDR:
		if len(c.ClusterCIDRs) > 0 {
			return validateDualStackCIDRs(c.ClusterCIDRs, path.Child("ClusterCIDRs"))
		}
	}
	return nil
}

func validateDualStackCIDRs(cidrs []string, path *field.Path) field.ErrorList {
	const pairMsg = "must be a either a single CIDR or dual-stack pair of CIDRs (e.g. [10.100.0.0/16, fde4:8dba:82e1::/48]"
	switch {
	case len(cidrs) == 0:
		return field.ErrorList{field.Invalid(path, cidrs, "must contain at least one CIDR")}
	case len(cidrs) > 2:
		return field.ErrorList{field.Invalid(path, cidrs, pairMsg)}
	}
	var errs field.ErrorList
	for i, c := range cidrs {
		if _, _, err := netutils.ParseCIDRSloppy(c); err != nil {
			errs = append(errs, field.Invalid(path.Index(i), c, "must be a valid CIDR block (e.g. 10.100.0.0/16 or fde4:8dba:82e1::/48)"))
		}
	}
	if len(cidrs) == 2 {
		if dual, err := netutils.IsDualStackCIDRStrings(cidrs); err == nil && !dual {
			errs = append(errs, field.Invalid(path, cidrs, pairMsg))
		}
	}
	return errs
}
