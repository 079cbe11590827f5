package config

import (
	"net/netip"
	"time"

	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/kube-proxy/config/v1alpha1"
)

// Config is the resolved, validated, normalised configuration the daemon runs
// with. It is produced by Options.Complete from the command line and/or the
// --config file and is never partially valid.
type Config struct {
	// Mode is the proxy mode to run (never blank: a blank mode became DefaultProxyMode).
	Mode ProxyMode
	// ModeDefaulted is true when neither the file nor the flags chose the mode.
	ModeDefaulted bool

	// HostnameOverride, if not empty, is the name of this node (trimmed and
	// lower-cased, as upstream); empty means use the OS hostname.
	HostnameOverride string
	// BindAddress overrides the node's primary IP; the zero Addr when it is
	// unspecified (0.0.0.0 or ::), meaning "use the Node object's addresses".
	BindAddress netip.Addr
	// HealthzBindAddress is "IP:port" for the health check server; "" disables it.
	HealthzBindAddress string
	// MetricsBindAddress is "IP:port" for the metrics server.
	MetricsBindAddress string
	// BindAddressHardFail makes failure to bind the healthz/metrics ports fatal.
	BindAddressHardFail bool
	// EnableProfiling serves /debug/pprof (and /debug/flags/v) on the metrics server.
	EnableProfiling bool
	// ShowHiddenMetricsForVersion is "" or the previous minor version ("1.36").
	ShowHiddenMetricsForVersion string

	// ClientConnection configures the API server client.
	ClientConnection ClientConnection
	// ConfigSyncPeriod is the informers' resync period.
	ConfigSyncPeriod time.Duration

	// DetectLocalMode says how traffic from local pods is recognised.
	DetectLocalMode LocalMode
	// ClusterCIDRs are the pod CIDRs (one per family, masked) used when
	// DetectLocalMode is ClusterCIDR; may be empty. Unparsable entries can only
	// occur (and are dropped) when another mode makes them irrelevant.
	ClusterCIDRs []netip.Prefix
	// DetectLocal holds the interface settings of the interface-based modes.
	DetectLocal DetectLocal

	// NodePortAddresses lists CIDRs and/or the keywords "primary", "localhost",
	// "all", validated but unexpanded (the daemon expands keywords once it
	// knows the node IPs). Empty means all local addresses.
	NodePortAddresses []string

	// OOMScoreAdj is the oom_score_adj to set for the process; nil leaves it.
	OOMScoreAdj *int32

	// SyncPeriod is the full resync period of the active mode (> 0).
	SyncPeriod time.Duration
	// MinSyncPeriod is the minimum time between rule syncs of the active mode (0 ≤ MinSyncPeriod ≤ SyncPeriod).
	MinSyncPeriod time.Duration
	// MasqueradeBit is the fwmark bit [0,31] of the active mode's block
	// (nftables.masqueradeBit in nftables mode, iptables.masqueradeBit otherwise).
	MasqueradeBit int32
	// MasqueradeAll SNATs all traffic sent to Service cluster IPs.
	MasqueradeAll bool
	// LocalhostNodePorts allows NodePorts on 127.0.0.0/8 (iptables mode, IPv4 only).
	LocalhostNodePorts bool
	// Conntrack holds the conntrack sysctl settings.
	Conntrack Conntrack
	// IPVS holds the ipvs mode's settings (ignored by the other modes).
	IPVS IPVS

	// FeatureGates is the command's gate set with the configured overrides applied.
	FeatureGates featuregate.FeatureGate
	// Logging is the logging configuration; the command has already applied it
	// when the run function is called.
	Logging logsapi.LoggingConfiguration

	// Master overrides the kubeconfig's API server URL (--master).
	Master string
	// ConfigFile is the --config path, "" if none.
	ConfigFile string
	// Cleanup asks to remove the rules of every mode and exit (--cleanup).
	Cleanup bool
	// InitOnly asks to do the privileged initialisation and exit (--init-only).
	InitOnly bool

	// V1Alpha1 is the effective configuration in file form, for /configz and
	// --write-config-to.
	V1Alpha1 *v1alpha1.KubeProxyConfiguration
	// Version is the version the proxy reports (logs, metrics, /statusz): Version, or
	// the one set with --version=vX.Y.Z (the command sets it).
	Version string
	// Flags maps every flag name to its current value, for /flagz.
	Flags map[string]string
	// Warnings are non-fatal problems the caller should log (e.g. the file
	// needed lenient decoding).
	Warnings []error
}

// ClientConnection configures the connection to the API server.
type ClientConnection struct {
	// Kubeconfig is the kubeconfig path; "" (with Master "") means in-cluster config.
	Kubeconfig string
	// AcceptContentTypes is the Accept header ("" for the client default).
	AcceptContentTypes string
	// ContentType is the content type of requests.
	ContentType string
	// QPS is the client rate limit.
	QPS float32
	// Burst is the client rate-limit burst (≥ 0).
	Burst int32
}

// DetectLocal holds the interface settings for local traffic detection.
type DetectLocal struct {
	// BridgeInterface is the pod bridge (DetectLocalMode BridgeInterface).
	BridgeInterface string
	// InterfaceNamePrefix is the pod interface prefix (DetectLocalMode InterfaceNamePrefix).
	InterfaceNamePrefix string
}

// Conntrack holds conntrack sysctl settings; zero durations leave the kernel value as is.
type Conntrack struct {
	// MaxPerCore is the nf_conntrack_max per CPU; 0 leaves the limit (and Min) alone.
	MaxPerCore *int32
	// Min is the lower bound of nf_conntrack_max.
	Min *int32
	// TCPEstablishedTimeout is nf_conntrack_tcp_timeout_established.
	TCPEstablishedTimeout *time.Duration
	// TCPCloseWaitTimeout is nf_conntrack_tcp_timeout_close_wait.
	TCPCloseWaitTimeout *time.Duration
	// TCPBeLiberal sets nf_conntrack_tcp_be_liberal to 1.
	TCPBeLiberal bool
	// UDPTimeout is nf_conntrack_udp_timeout.
	UDPTimeout time.Duration
	// UDPStreamTimeout is nf_conntrack_udp_timeout_stream.
	UDPStreamTimeout time.Duration
}

// IPVS is the ipvs mode's configuration (KubeProxyIPVSConfiguration).
type IPVS struct {
	// Scheduler is the IPVS scheduler ("" means rr).
	Scheduler string
	// ExcludeCIDRs are never cleaned up: virtual servers there are kept.
	ExcludeCIDRs []netip.Prefix
	// StrictARP sets arp_ignore=1 and arp_announce=2 (for MetalLB's L2 mode).
	StrictARP bool
	// TCPTimeout, TCPFinTimeout and UDPTimeout are IPVS's connection timeouts;
	// 0 leaves the kernel's.
	TCPTimeout, TCPFinTimeout, UDPTimeout time.Duration
}
