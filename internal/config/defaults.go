package config

import (
	"fmt"
	"net"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/kube-proxy/config/v1alpha1"
	netutils "k8s.io/utils/net"
	"k8s.io/utils/ptr"
)

// Well-known values shared with upstream.
const (
	// DefaultHealthzPort is the port of the health check server (ports.ProxyHealthzPort).
	DefaultHealthzPort = 10256
	// DefaultMetricsPort is the port of the metrics server (ports.ProxyStatusPort).
	DefaultMetricsPort = 10249
	// DefaultOOMScoreAdj is kube-proxy's oom_score_adj (qos.KubeProxyOOMScoreAdj).
	DefaultOOMScoreAdj = -999
)

// setV1Alpha1Defaults fills unset fields of a file object exactly as upstream's
// v1alpha1 defaulting does. It is mode-independent; the mode-dependent
// defaults are applied later by applyPlatformDefaults.
func setV1Alpha1Defaults(obj *v1alpha1.KubeProxyConfiguration) {
	if obj.BindAddress == "" {
		obj.BindAddress = "0.0.0.0"
	}
	healthzHost, metricsHost := "[::]", "[::1]"
	if ip := netutils.ParseIPSloppy(obj.BindAddress); ip != nil && ip.To4() != nil {
		healthzHost, metricsHost = "0.0.0.0", "127.0.0.1"
	}
	if obj.HealthzBindAddress == "" {
		obj.HealthzBindAddress = fmt.Sprintf("%s:%d", healthzHost, DefaultHealthzPort)
	} else {
		obj.HealthzBindAddress = appendPortIfNeeded(obj.HealthzBindAddress, DefaultHealthzPort)
	}
	if obj.MetricsBindAddress == "" {
		obj.MetricsBindAddress = fmt.Sprintf("%s:%d", metricsHost, DefaultMetricsPort)
	} else {
		obj.MetricsBindAddress = appendPortIfNeeded(obj.MetricsBindAddress, DefaultMetricsPort)
	}
	if obj.OOMScoreAdj == nil {
		obj.OOMScoreAdj = ptr.To[int32](DefaultOOMScoreAdj)
	}
	defaultDuration(&obj.IPTables.SyncPeriod, 30*time.Second)
	defaultDuration(&obj.IPTables.MinSyncPeriod, time.Second)
	if obj.IPTables.LocalhostNodePorts == nil {
		obj.IPTables.LocalhostNodePorts = ptr.To(true)
	}
	// Upstream defaults ipvs.syncPeriod but not ipvs.minSyncPeriod.
	defaultDuration(&obj.IPVS.SyncPeriod, 30*time.Second)
	defaultDuration(&obj.NFTables.SyncPeriod, 30*time.Second)
	defaultDuration(&obj.NFTables.MinSyncPeriod, time.Second)
	if obj.Conntrack.MaxPerCore == nil {
		obj.Conntrack.MaxPerCore = ptr.To[int32](32 * 1024)
	}
	if obj.Conntrack.Min == nil {
		obj.Conntrack.Min = ptr.To[int32](128 * 1024)
	}
	if obj.IPTables.MasqueradeBit == nil {
		obj.IPTables.MasqueradeBit = ptr.To[int32](14)
	}
	if obj.NFTables.MasqueradeBit == nil {
		obj.NFTables.MasqueradeBit = ptr.To[int32](14)
	}
	if obj.Conntrack.TCPEstablishedTimeout == nil {
		obj.Conntrack.TCPEstablishedTimeout = &metav1.Duration{Duration: 24 * time.Hour}
	}
	if obj.Conntrack.TCPCloseWaitTimeout == nil {
		// One hour, to outlive typical server FIN_WAIT timeouts (kubernetes#32551).
		obj.Conntrack.TCPCloseWaitTimeout = &metav1.Duration{Duration: time.Hour}
	}
	defaultDuration(&obj.ConfigSyncPeriod, 15*time.Minute)
	if obj.ClientConnection.ContentType == "" {
		obj.ClientConnection.ContentType = "application/vnd.kubernetes.protobuf"
	}
	if obj.ClientConnection.QPS == 0 {
		obj.ClientConnection.QPS = 5
	}
	if obj.ClientConnection.Burst == 0 {
		obj.ClientConnection.Burst = 10
	}
	if obj.FeatureGates == nil {
		obj.FeatureGates = map[string]bool{}
	}
	logsapi.SetRecommendedLoggingConfiguration(&obj.Logging)
}

func defaultDuration(d *metav1.Duration, def time.Duration) {
	if d.Duration == 0 {
		d.Duration = def
	}
}

// appendPortIfNeeded turns a bare IP into IP:port; anything else (already
// host:port, or invalid and left for validation to report) is returned as is.
func appendPortIfNeeded(addr string, port int32) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	if netutils.ParseIPSloppy(addr) == nil {
		return addr
	}
	return net.JoinHostPort(addr, strconv.Itoa(int(port)))
}

// newDefaultSettings is what the flags start from: a defaulted, empty file.
func newDefaultSettings() *settings {
	obj := &v1alpha1.KubeProxyConfiguration{}
	setV1Alpha1Defaults(obj)
	return fromV1Alpha1(obj)
}

// applyPlatformDefaults applies the Linux defaults that depend on the mode,
// after flags and/or the file are resolved (upstream platformApplyDefaults).
// It reports whether the mode was defaulted.
func applyPlatformDefaults(s *settings) (modeDefaulted bool) {
	if s.Mode == "" {
		s.Mode = DefaultProxyMode
		modeDefaulted = true
	}
	if s.Mode == ProxyModeNFTables && len(s.NodePortAddresses) == 0 {
		s.NodePortAddresses = []string{NodePortAddressesPrimary}
	}
	if s.DetectLocalMode == "" {
		s.DetectLocalMode = LocalModeClusterCIDR
	}
	return modeDefaulted
}
