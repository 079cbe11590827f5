package config

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	metricsfeatures "k8s.io/component-base/metrics/features"
	zpagesfeatures "k8s.io/component-base/zpages/features"
)

// Feature gates that change what kproxy does. Their names, stages and defaults
// are those of upstream Kubernetes 1.37.
const (
	// KubeProxyIPVS allows mode "ipvs" (deprecated in 1.37, still on by default).
	KubeProxyIPVS featuregate.Feature = "KubeProxyIPVS"
	// KubeProxyNFTablesLocalhostNodePorts serves TCP NodePorts on loopback in
	// nftables mode when nodePortAddresses explicitly includes loopback (alpha).
	KubeProxyNFTablesLocalhostNodePorts featuregate.Feature = "KubeProxyNFTablesLocalhostNodePorts"
	// AllowServiceExternalIPs makes the proxy honour Service spec.externalIPs (GA).
	AllowServiceExternalIPs featuregate.Feature = "AllowServiceExternalIPs"
	// MultiCIDRServiceAllocator watches ServiceCIDR objects (GA, locked on).
	MultiCIDRServiceAllocator featuregate.Feature = "MultiCIDRServiceAllocator"
	// PreferSameTrafficDistribution enables trafficDistribution PreferSameZone /
	// PreferSameNode (GA, locked on).
	PreferSameTrafficDistribution featuregate.Feature = "PreferSameTrafficDistribution"
	// NFTablesNetlink (beta, on by default): upstream lists its table over netlink
	// instead of with nft; kproxy also writes its transactions over netlink. Off,
	// both talk to the kernel through the nft command only.
	NFTablesNetlink featuregate.Feature = "NFTablesNetlink"
	// NFTablesProxyMode made mode "nftables" available (GA, locked on).
	NFTablesProxyMode featuregate.Feature = "NFTablesProxyMode"
)

// EmulatedKubernetesVersion is the upstream minor version whose feature-gate
// table, defaults and validation kproxy reproduces.
var emulatedKubernetesVersion = version.MustParse("1.37")

func proxyGates() map[featuregate.Feature]featuregate.VersionedSpecs {
	v := version.MustParse
	return map[featuregate.Feature]featuregate.VersionedSpecs{
		KubeProxyIPVS: {
			{Version: v("1.0"), Default: true, PreRelease: featuregate.GA},
			{Version: v("1.37"), Default: true, PreRelease: featuregate.Deprecated},
		},
		KubeProxyNFTablesLocalhostNodePorts: {
			{Version: v("1.37"), Default: false, PreRelease: featuregate.Alpha},
		},
		AllowServiceExternalIPs: {
			{Version: v("1.0"), Default: true, PreRelease: featuregate.GA},
		},
		MultiCIDRServiceAllocator: {
			{Version: v("1.27"), Default: false, PreRelease: featuregate.Alpha},
			{Version: v("1.31"), Default: false, PreRelease: featuregate.Beta},
			{Version: v("1.33"), Default: true, PreRelease: featuregate.GA},
			{Version: v("1.34"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
		},
		PreferSameTrafficDistribution: {
			{Version: v("1.33"), Default: false, PreRelease: featuregate.Alpha},
			{Version: v("1.34"), Default: true, PreRelease: featuregate.Beta},
			{Version: v("1.35"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
		},
		NFTablesNetlink: {
			{Version: v("1.37"), Default: true, PreRelease: featuregate.Beta},
		},
		NFTablesProxyMode: {
			{Version: v("1.29"), Default: false, PreRelease: featuregate.Alpha},
			{Version: v("1.31"), Default: true, PreRelease: featuregate.Beta},
			{Version: v("1.33"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
		},
	}
}

// NewFeatureGate returns a fresh gate set knowing every gate upstream kube-proxy
// 1.37 accepts: the proxy gates above, the component-base logging, metrics and
// z-pages gates, and (accepted for compatibility, without effect) the rest of
// upstream's table. client-go's gates are registered with client-go's specs; they
// take effect once the command installs the set with ClientGoGates. Each command
// gets its own; there is no global registry.
func NewFeatureGate() (featuregate.MutableVersionedFeatureGate, error) {
	fg := featuregate.NewVersionedFeatureGate(emulatedKubernetesVersion)
	if err := fg.AddVersioned(proxyGates()); err != nil {
		return nil, fmt.Errorf("registering proxy feature gates: %w", err)
	}
	for name, add := range map[string]func(featuregate.MutableVersionedFeatureGate) error{
		"logging":   logsapi.AddFeatureGates,
		"metrics":   metricsfeatures.AddFeatureGates,
		"zpages":    zpagesfeatures.AddFeatureGates,
		"client-go": addClientGoGates,
	} {
		if err := add(fg); err != nil {
			return nil, fmt.Errorf("registering %s feature gates: %w", name, err)
		}
	}
	known := fg.GetAllVersioned()
	others := make(map[featuregate.Feature]featuregate.VersionedSpecs, len(upstreamGates))
	for name, specs := range upstreamGates {
		if _, dup := known[name]; !dup {
			others[name] = specs
		}
	}
	if err := fg.AddVersioned(others); err != nil {
		return nil, fmt.Errorf("registering upstream feature gates: %w", err)
	}
	return fg, nil
}
