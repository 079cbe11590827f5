package config

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // the json format and its --log-json-* flags, as upstream
	netutils "k8s.io/utils/net"
	"k8s.io/utils/ptr"
)

// Options holds what the command line says: flags bind directly into a
// defaulted settings object (as upstream binds into its internal config), plus
// the values that have no place in the file format.
type Options struct {
	// ConfigFile is --config.
	ConfigFile string
	// WriteConfigTo is --write-config-to.
	WriteConfigTo string
	// Cleanup is --cleanup.
	Cleanup bool
	// InitOnly is --init-only.
	InitOnly bool
	// RunnableModes are the modes this build accepts; others fail validation.
	RunnableModes []ProxyMode

	master           string
	healthzPort      int32
	metricsPort      int32
	hostnameOverride string

	iptablesSyncPeriod    time.Duration
	iptablesMinSyncPeriod time.Duration
	ipvsSyncPeriod        time.Duration
	ipvsMinSyncPeriod     time.Duration
	clusterCIDRs          string

	settings     *settings
	featureGates featuregate.MutableVersionedFeatureGate
}

// NewOptions returns options holding upstream's defaults. fg is the command's
// feature gate set (see NewFeatureGate); Complete applies the configured
// gates to it.
func NewOptions(fg featuregate.MutableVersionedFeatureGate) *Options {
	return &Options{
		RunnableModes: DefaultRunnableModes(),
		healthzPort:   DefaultHealthzPort,
		metricsPort:   DefaultMetricsPort,
		settings:      newDefaultSettings(),
		featureGates:  fg,
	}
}

const ignoredWithConfig = "This parameter is ignored if a config file is specified by --config."

// AddFlags registers every flag upstream kube-proxy 1.37 accepts on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	s := o.settings
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "The path to the configuration file.")
	fs.StringVar(&o.WriteConfigTo, "write-config-to", o.WriteConfigTo, "If set, write the default configuration values to this file and exit.")
	fs.BoolVar(&o.Cleanup, "cleanup", o.Cleanup, "If true cleanup iptables and ipvs rules and exit.")

	fs.Var(cliflag.NewMapStringBool(&s.FeatureGates), "feature-gates", "A set of key=value pairs that describe feature gates for alpha/experimental features. "+
		"Options are:\n"+strings.Join(o.featureGates.KnownFeatures(), "\n")+"\n"+ignoredWithConfig)

	fs.StringVar(&s.ClientConnection.Kubeconfig, "kubeconfig", s.ClientConnection.Kubeconfig, "Path to kubeconfig file with authorization information (the master location can be overridden by the master flag).")
	fs.StringVar(&o.master, "master", o.master, "The address of the Kubernetes API server (overrides any value in kubeconfig)")
	fs.StringVar(&s.ClientConnection.ContentType, "kube-api-content-type", s.ClientConnection.ContentType, "Content type of requests sent to apiserver.")
	fs.Int32Var(&s.ClientConnection.Burst, "kube-api-burst", s.ClientConnection.Burst, "Burst to use while talking with kubernetes apiserver")
	fs.Float32Var(&s.ClientConnection.QPS, "kube-api-qps", s.ClientConnection.QPS, "QPS to use while talking with kubernetes apiserver")

	fs.StringVar(&o.hostnameOverride, "hostname-override", o.hostnameOverride, "If non-empty, will be used as the name of the Node that kube-proxy is running on. If unset, the node name is assumed to be the same as the node's hostname.")
	fs.Var(&ipVar{&s.BindAddress}, "bind-address", "Overrides kube-proxy's idea of what its node's primary IP is. Note that the name is a historical artifact, and kube-proxy does not actually bind any sockets to this IP. "+ignoredWithConfig)
	fs.Var(&ipPortVar{&s.HealthzBindAddress}, "healthz-bind-address", "The IP address and port for the health check server to serve on, defaulting to \"0.0.0.0:10256\". "+ignoredWithConfig)
	fs.Var(&ipPortVar{&s.MetricsBindAddress}, "metrics-bind-address", "The IP address and port for the metrics server to serve on, defaulting to \"127.0.0.1:10249\". (Set to \"0.0.0.0:10249\" / \"[::]:10249\" to bind on all interfaces.) "+ignoredWithConfig)
	fs.BoolVar(&s.BindAddressHardFail, "bind-address-hard-fail", s.BindAddressHardFail, "If true kube-proxy will treat failure to bind to a port as fatal and exit")
	fs.BoolVar(&s.EnableProfiling, "profiling", s.EnableProfiling, "If true enables profiling via web interface on /debug/pprof handler. "+ignoredWithConfig)
	fs.StringVar(&s.ShowHiddenMetricsForVersion, "show-hidden-metrics-for-version", s.ShowHiddenMetricsForVersion,
		"The previous version for which you want to show hidden metrics. "+
			"Only the previous minor version is meaningful, other values will not be allowed. "+
			"The format is <major>.<minor>, e.g.: '1.16'. "+
			"The purpose of this format is make sure you have the opportunity to notice if the next release hides additional metrics, "+
			"rather than being surprised when they are permanently removed in the release after that. "+ignoredWithConfig)
	fs.BoolVar(&o.InitOnly, "init-only", o.InitOnly, "If true, perform any initialization steps that must be done with full root privileges, and then exit. After doing this, you can run kube-proxy again with only the CAP_NET_ADMIN capability.")
	fs.Var(&s.Mode, "proxy-mode", "Which proxy mode to use: on Linux this can be 'nftables' (default), 'iptables', or 'ipvs'. On Windows the only supported value is 'kernelspace'. "+ignoredWithConfig)

	fs.Int32Var(s.IPTables.MasqueradeBit, "iptables-masquerade-bit", ptr.Deref(s.IPTables.MasqueradeBit, 14), "If using the iptables or ipvs proxy mode, the bit of the fwmark space to mark packets requiring SNAT with.  Must be within the range [0, 31].")
	fs.BoolVar(&s.Linux.MasqueradeAll, "masquerade-all", s.Linux.MasqueradeAll, "SNAT all traffic sent via Service cluster IPs. This may be required with some CNI plugins. Only supported on Linux.")
	fs.BoolVar(s.IPTables.LocalhostNodePorts, "iptables-localhost-nodeports", ptr.Deref(s.IPTables.LocalhostNodePorts, true), "If false, kube-proxy will disable the legacy behavior of allowing NodePort services to be accessed via localhost. (Applies only to iptables mode and IPv4; localhost NodePorts are never allowed with other proxy modes or with IPv6.)")
	fs.DurationVar(&o.iptablesSyncPeriod, "iptables-sync-period", s.SyncPeriod.Duration, "An interval (e.g. '5s', '1m', '2h22m') indicating how frequently various re-synchronizing and cleanup operations are performed. Must be greater than 0.")
	fs.DurationVar(&o.iptablesMinSyncPeriod, "iptables-min-sync-period", s.MinSyncPeriod.Duration, "The minimum period between iptables rule resyncs (e.g. '5s', '1m', '2h22m'). A value of 0 means every Service or EndpointSlice change will result in an immediate iptables resync.")

	fs.DurationVar(&o.ipvsSyncPeriod, "ipvs-sync-period", s.SyncPeriod.Duration, "An interval (e.g. '5s', '1m', '2h22m') indicating how frequently various re-synchronizing and cleanup operations are performed. Must be greater than 0.")
	fs.DurationVar(&o.ipvsMinSyncPeriod, "ipvs-min-sync-period", s.MinSyncPeriod.Duration, "The minimum period between IPVS rule resyncs (e.g. '5s', '1m', '2h22m'). A value of 0 means every Service or EndpointSlice change will result in an immediate IPVS resync.")
	fs.StringVar(&s.IPVS.Scheduler, "ipvs-scheduler", s.IPVS.Scheduler, "The ipvs scheduler type when proxy mode is ipvs")
	fs.StringSliceVar(&s.IPVS.ExcludeCIDRs, "ipvs-exclude-cidrs", s.IPVS.ExcludeCIDRs, "A comma-separated list of CIDRs which the ipvs proxier should not touch when cleaning up IPVS rules.")
	fs.BoolVar(&s.IPVS.StrictARP, "ipvs-strict-arp", s.IPVS.StrictARP, "Enable strict ARP by setting arp_ignore to 1 and arp_announce to 2")
	fs.DurationVar(&s.IPVS.TCPTimeout.Duration, "ipvs-tcp-timeout", s.IPVS.TCPTimeout.Duration, "The timeout for idle IPVS TCP connections, 0 to leave as-is. (e.g. '5s', '1m', '2h22m').")
	fs.DurationVar(&s.IPVS.TCPFinTimeout.Duration, "ipvs-tcpfin-timeout", s.IPVS.TCPFinTimeout.Duration, "The timeout for IPVS TCP connections after receiving a FIN packet, 0 to leave as-is. (e.g. '5s', '1m', '2h22m').")
	fs.DurationVar(&s.IPVS.UDPTimeout.Duration, "ipvs-udp-timeout", s.IPVS.UDPTimeout.Duration, "The timeout for IPVS UDP packets, 0 to leave as-is. (e.g. '5s', '1m', '2h22m').")

	fs.Var(&s.DetectLocalMode, "detect-local-mode", "Mode to use to detect local traffic. "+ignoredWithConfig)
	fs.StringVar(&s.DetectLocal.BridgeInterface, "pod-bridge-interface", s.DetectLocal.BridgeInterface, "A bridge interface name. When --detect-local-mode is set to BridgeInterface, kube-proxy will consider traffic to be local if it originates from this bridge.")
	fs.StringVar(&s.DetectLocal.InterfaceNamePrefix, "pod-interface-name-prefix", s.DetectLocal.InterfaceNamePrefix, "An interface name prefix. When --detect-local-mode is set to InterfaceNamePrefix, kube-proxy will consider traffic to be local if it originates from any interface whose name begins with this prefix.")
	fs.StringVar(&o.clusterCIDRs, "cluster-cidr", strings.Join(s.DetectLocal.ClusterCIDRs, ","), "The CIDR range of the pods in the cluster. (For dual-stack clusters, this can be a comma-separated dual-stack pair of CIDR ranges.). When --detect-local-mode is set to ClusterCIDR, kube-proxy will consider traffic to be local if its source IP is in this range. (Otherwise it is not used.) "+ignoredWithConfig)

	fs.StringSliceVar(&s.NodePortAddresses, "nodeport-addresses", s.NodePortAddresses,
		"A list of CIDR ranges and/or keywords that expand to CIDR ranges. NodePort services are only accessible on node IPs covered by the list. Supported keywords: 'primary' (the Node object's primary IPv4 and/or IPv6 addresses), 'localhost' (127.0.0.0/8 and ::1/128), and 'all' (0.0.0.0/0 and ::/0). Any combination of valid keywords and CIDRS may be included in the list. Serving NodePorts on loopback IPs is only supported in iptables mode (IPv4 only, see --iptables-localhost-nodeports), and, only for TCP, in nftables mode when the KubeProxyNFTablesLocalhostNodePorts feature gate is enabled and the list explicitly includes loopback (e.g. 'localhost'). If unset, this defaults to 'all' in iptables and ipvs mode, and to 'primary' in nftables mode. "+ignoredWithConfig)

	fs.Int32Var(s.Linux.OOMScoreAdj, "oom-score-adj", ptr.Deref(s.Linux.OOMScoreAdj, DefaultOOMScoreAdj), "The oom-score-adj value for kube-proxy process. Values must be within the range [-1000, 1000]. "+ignoredWithConfig)
	fs.Int32Var(s.Linux.Conntrack.MaxPerCore, "conntrack-max-per-core", *s.Linux.Conntrack.MaxPerCore, "Maximum number of NAT connections to track per CPU core (0 to leave the limit as-is and ignore conntrack-min).")
	fs.Int32Var(s.Linux.Conntrack.Min, "conntrack-min", *s.Linux.Conntrack.Min, "Minimum number of conntrack entries to allocate, regardless of conntrack-max-per-core (set conntrack-max-per-core=0 to leave the limit as-is).")
	fs.DurationVar(&s.Linux.Conntrack.TCPEstablishedTimeout.Duration, "conntrack-tcp-timeout-established", s.Linux.Conntrack.TCPEstablishedTimeout.Duration, "Idle timeout for established TCP connections (0 to leave as-is)")
	fs.DurationVar(&s.Linux.Conntrack.TCPCloseWaitTimeout.Duration, "conntrack-tcp-timeout-close-wait", s.Linux.Conntrack.TCPCloseWaitTimeout.Duration, "NAT timeout for TCP connections in the CLOSE_WAIT state")
	fs.BoolVar(&s.Linux.Conntrack.TCPBeLiberal, "conntrack-tcp-be-liberal", s.Linux.Conntrack.TCPBeLiberal, "Enable liberal mode for tracking TCP packets by setting nf_conntrack_tcp_be_liberal to 1")
	fs.DurationVar(&s.Linux.Conntrack.UDPTimeout.Duration, "conntrack-udp-timeout", s.Linux.Conntrack.UDPTimeout.Duration, "Idle timeout for UNREPLIED UDP connections (0 to leave as-is)")
	fs.DurationVar(&s.Linux.Conntrack.UDPStreamTimeout.Duration, "conntrack-udp-timeout-stream", s.Linux.Conntrack.UDPStreamTimeout.Duration, "Idle timeout for ASSURED UDP connections (0 to leave as-is)")
	fs.DurationVar(&s.ConfigSyncPeriod.Duration, "config-sync-period", s.ConfigSyncPeriod.Duration, "How often configuration from the apiserver is refreshed.  Must be greater than 0.")

	fs.Int32Var(&o.healthzPort, "healthz-port", o.healthzPort, "The port to bind the health check server. Use 0 to disable.")
	_ = fs.MarkDeprecated("healthz-port", "This flag is deprecated and will be removed in a future release. Please use --healthz-bind-address instead.")
	fs.Int32Var(&o.metricsPort, "metrics-port", o.metricsPort, "The port to bind the metrics server. Use 0 to disable.")
	_ = fs.MarkDeprecated("metrics-port", "This flag is deprecated and will be removed in a future release. Please use --metrics-bind-address instead.")

	logsapi.AddFlags(&s.Logging, fs)
}

// ipVar is an IP-valued flag bound to a string, checked when set (as
// upstream's IPVar; an empty value leaves the target unchanged).
type ipVar struct{ val *string }

func (v *ipVar) Set(s string) error {
	if s == "" {
		return nil
	}
	if netutils.ParseIPSloppy(s) == nil {
		return fmt.Errorf("%q is not a valid IP address", s)
	}
	*v.val = s
	return nil
}
func (v *ipVar) String() string { return *v.val }
func (v *ipVar) Type() string   { return "ip" }

// ipPortVar is an "IP" or "IP:port" flag bound to a string (upstream's IPPortVar).
type ipPortVar struct{ val *string }

func (v *ipPortVar) Set(s string) error {
	if s == "" {
		return nil
	}
	if netutils.ParseIPSloppy(s) != nil {
		*v.val = s
		return nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not in a valid format (ip or ip:port): %w", s, err)
	}
	if netutils.ParseIPSloppy(host) == nil {
		return fmt.Errorf("%q is not a valid IP address", host)
	}
	if _, err := netutils.ParsePort(port, true); err != nil {
		return fmt.Errorf("%q is not a valid number", port)
	}
	*v.val = s
	return nil
}
func (v *ipPortVar) String() string { return *v.val }
func (v *ipPortVar) Type() string   { return "ipport" }
