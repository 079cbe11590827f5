package config

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentbaseconfigv1alpha1 "k8s.io/component-base/config/v1alpha1"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/kube-proxy/config/v1alpha1"
)

// settings mirrors upstream's internal KubeProxyConfiguration: the shape that
// flags bind to, that validation walks (its field names are the validation
// paths), and that converts to and from the v1alpha1 file format. Unlike
// v1alpha1 it has a single SyncPeriod/MinSyncPeriod/MasqueradeAll, taken from
// the block of the active mode.
type settings struct {
	FeatureGates     map[string]bool
	ClientConnection componentbaseconfigv1alpha1.ClientConnectionConfiguration
	Logging          logsapi.LoggingConfiguration

	HostnameOverride            string
	BindAddress                 string
	HealthzBindAddress          string
	MetricsBindAddress          string
	BindAddressHardFail         bool
	EnableProfiling             bool
	ShowHiddenMetricsForVersion string

	Mode      ProxyMode
	IPTables  iptablesSettings
	IPVS      ipvsSettings
	NFTables  nftablesSettings
	Winkernel v1alpha1.KubeProxyWinkernelConfiguration
	Linux     linuxSettings
	// WindowsRunAsService is carried for round-tripping only.
	WindowsRunAsService bool

	DetectLocalMode LocalMode
	DetectLocal     detectLocalSettings

	NodePortAddresses []string

	SyncPeriod       metav1.Duration
	MinSyncPeriod    metav1.Duration
	ConfigSyncPeriod metav1.Duration
}

type iptablesSettings struct {
	MasqueradeBit      *int32
	LocalhostNodePorts *bool
}

type ipvsSettings struct {
	Scheduler     string
	ExcludeCIDRs  []string
	StrictARP     bool
	TCPTimeout    metav1.Duration
	TCPFinTimeout metav1.Duration
	UDPTimeout    metav1.Duration
}

type nftablesSettings struct {
	MasqueradeBit *int32
}

type linuxSettings struct {
	Conntrack     v1alpha1.KubeProxyConntrackConfiguration
	MasqueradeAll bool
	OOMScoreAdj   *int32
}

type detectLocalSettings struct {
	BridgeInterface     string
	ClusterCIDRs        []string
	InterfaceNamePrefix string
}

// blockMode is the mode whose per-mode block (syncPeriod, minSyncPeriod,
// masqueradeAll) is used: a blank mode reads the block of DefaultProxyMode
// (iptables), as upstream's conversion does.
func blockMode(m ProxyMode) ProxyMode {
	if m == "" {
		return DefaultProxyMode
	}
	return m
}

// fromV1Alpha1 converts a (defaulted) file object to settings.
func fromV1Alpha1(in *v1alpha1.KubeProxyConfiguration) *settings {
	out := &settings{
		FeatureGates:                in.FeatureGates,
		ClientConnection:            in.ClientConnection,
		Logging:                     in.Logging,
		HostnameOverride:            in.HostnameOverride,
		BindAddress:                 in.BindAddress,
		HealthzBindAddress:          in.HealthzBindAddress,
		MetricsBindAddress:          in.MetricsBindAddress,
		BindAddressHardFail:         in.BindAddressHardFail,
		EnableProfiling:             in.EnableProfiling,
		ShowHiddenMetricsForVersion: in.ShowHiddenMetricsForVersion,
		Mode:                        ProxyMode(in.Mode),
		IPTables: iptablesSettings{
			MasqueradeBit:      in.IPTables.MasqueradeBit,
			LocalhostNodePorts: in.IPTables.LocalhostNodePorts,
		},
		IPVS: ipvsSettings{
			Scheduler:     in.IPVS.Scheduler,
			ExcludeCIDRs:  in.IPVS.ExcludeCIDRs,
			StrictARP:     in.IPVS.StrictARP,
			TCPTimeout:    in.IPVS.TCPTimeout,
			TCPFinTimeout: in.IPVS.TCPFinTimeout,
			UDPTimeout:    in.IPVS.UDPTimeout,
		},
		NFTables:            nftablesSettings{MasqueradeBit: in.NFTables.MasqueradeBit},
		Winkernel:           in.Winkernel,
		Linux:               linuxSettings{Conntrack: in.Conntrack, OOMScoreAdj: in.OOMScoreAdj},
		WindowsRunAsService: in.WindowsRunAsService,
		DetectLocalMode:     LocalMode(in.DetectLocalMode),
		DetectLocal: detectLocalSettings{
			BridgeInterface:     in.DetectLocal.BridgeInterface,
			InterfaceNamePrefix: in.DetectLocal.InterfaceNamePrefix,
		},
		NodePortAddresses: in.NodePortAddresses,
		ConfigSyncPeriod:  in.ConfigSyncPeriod,
	}
	switch blockMode(out.Mode) {
	case ProxyModeNFTables:
		out.Linux.MasqueradeAll = in.NFTables.MasqueradeAll
	default:
		out.Linux.MasqueradeAll = in.IPTables.MasqueradeAll
	}
	switch blockMode(out.Mode) {
	case ProxyModeIPVS:
		out.SyncPeriod, out.MinSyncPeriod = in.IPVS.SyncPeriod, in.IPVS.MinSyncPeriod
	case ProxyModeNFTables:
		out.SyncPeriod, out.MinSyncPeriod = in.NFTables.SyncPeriod, in.NFTables.MinSyncPeriod
	default:
		out.SyncPeriod, out.MinSyncPeriod = in.IPTables.SyncPeriod, in.IPTables.MinSyncPeriod
	}
	if in.ClusterCIDR != "" {
		out.DetectLocal.ClusterCIDRs = strings.Split(in.ClusterCIDR, ",")
	}
	return out
}

// toV1Alpha1 converts settings to the file format. As upstream, only the
// active mode's block carries the sync periods; the others are left zero.
func (s *settings) toV1Alpha1() *v1alpha1.KubeProxyConfiguration {
	out := &v1alpha1.KubeProxyConfiguration{
		TypeMeta: metav1.TypeMeta{
			APIVersion: v1alpha1.SchemeGroupVersion.String(),
			Kind:       "KubeProxyConfiguration",
		},
		FeatureGates:                s.FeatureGates,
		ClientConnection:            s.ClientConnection,
		Logging:                     s.Logging,
		HostnameOverride:            s.HostnameOverride,
		BindAddress:                 s.BindAddress,
		HealthzBindAddress:          s.HealthzBindAddress,
		MetricsBindAddress:          s.MetricsBindAddress,
		BindAddressHardFail:         s.BindAddressHardFail,
		EnableProfiling:             s.EnableProfiling,
		ShowHiddenMetricsForVersion: s.ShowHiddenMetricsForVersion,
		Mode:                        v1alpha1.ProxyMode(s.Mode),
		IPTables: v1alpha1.KubeProxyIPTablesConfiguration{
			MasqueradeBit:      s.IPTables.MasqueradeBit,
			LocalhostNodePorts: s.IPTables.LocalhostNodePorts,
		},
		IPVS: v1alpha1.KubeProxyIPVSConfiguration{
			Scheduler:     s.IPVS.Scheduler,
			ExcludeCIDRs:  s.IPVS.ExcludeCIDRs,
			StrictARP:     s.IPVS.StrictARP,
			TCPTimeout:    s.IPVS.TCPTimeout,
			TCPFinTimeout: s.IPVS.TCPFinTimeout,
			UDPTimeout:    s.IPVS.UDPTimeout,
		},
		NFTables:            v1alpha1.KubeProxyNFTablesConfiguration{MasqueradeBit: s.NFTables.MasqueradeBit},
		Winkernel:           s.Winkernel,
		DetectLocalMode:     v1alpha1.LocalMode(s.DetectLocalMode),
		DetectLocal:         v1alpha1.DetectLocalConfiguration{BridgeInterface: s.DetectLocal.BridgeInterface, InterfaceNamePrefix: s.DetectLocal.InterfaceNamePrefix},
		ClusterCIDR:         strings.Join(s.DetectLocal.ClusterCIDRs, ","),
		NodePortAddresses:   s.NodePortAddresses,
		OOMScoreAdj:         s.Linux.OOMScoreAdj,
		Conntrack:           s.Linux.Conntrack,
		ConfigSyncPeriod:    s.ConfigSyncPeriod,
		WindowsRunAsService: s.WindowsRunAsService,
	}
	switch blockMode(s.Mode) {
	case ProxyModeNFTables:
		out.NFTables.MasqueradeAll = s.Linux.MasqueradeAll
	default:
		out.IPTables.MasqueradeAll = s.Linux.MasqueradeAll
	}
	switch blockMode(s.Mode) {
	case ProxyModeIPVS:
		out.IPVS.SyncPeriod, out.IPVS.MinSyncPeriod = s.SyncPeriod, s.MinSyncPeriod
	case ProxyModeNFTables:
		out.NFTables.SyncPeriod, out.NFTables.MinSyncPeriod = s.SyncPeriod, s.MinSyncPeriod
	default:
		out.IPTables.SyncPeriod, out.IPTables.MinSyncPeriod = s.SyncPeriod, s.MinSyncPeriod
	}
	return out
}
