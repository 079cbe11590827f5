package config

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	logsapi "k8s.io/component-base/logs/api/v1"
	netutils "k8s.io/utils/net"
	"k8s.io/utils/ptr"
)

// ValidationError is Complete's error for an invalid configuration: every field
// error, with upstream's field paths and messages. Other errors of Complete (an
// unreadable file, an unknown feature gate) are upstream's "complete" failures.
type ValidationError struct{ Errs field.ErrorList }

func (e *ValidationError) Error() string { return e.Errs.ToAggregate().Error() }

// Unwrap returns the field errors as an aggregate.
func (e *ValidationError) Unwrap() error { return e.Errs.ToAggregate() }

// Complete resolves the flags parsed into fs (which AddFlags populated) and the
// --config file into a validated Config, following upstream's precedence:
//
//   - Without --config, flags (over upstream defaults) are the configuration;
//     the deprecated --healthz-port/--metrics-port are folded into the bind
//     addresses unless --write-config-to is given.
//   - With --config, the file replaces every flag-settable value, except that
//     logging flags given on the command line win over the file, and
//     --hostname-override, --master, --cleanup, --init-only and
//     --write-config-to still apply. Other flags are silently ignored, as upstream.
//
// Then the Linux mode-dependent defaults are applied, the feature gates are
// set on the command's gate set, and everything is validated. Any error names
// the offending field; no partial Config is returned.
func (o *Options) Complete(fs *pflag.FlagSet) (*Config, error) {
	var warnings []error
	s := o.settings
	if o.ConfigFile == "" && o.WriteConfigTo == "" {
		s.HealthzBindAddress = addressFromDeprecatedFlag(s.HealthzBindAddress, o.healthzPort)
		s.MetricsBindAddress = addressFromDeprecatedFlag(s.MetricsBindAddress, o.metricsPort)
	}
	if o.ConfigFile != "" {
		fileSettings, lenientReason, err := loadFile(o.ConfigFile)
		if err != nil {
			return nil, err
		}
		if lenientReason != nil {
			warnings = append(warnings, fmt.Errorf("using lenient decoding of %s as strict decoding failed: %w", o.ConfigFile, lenientReason))
		}
		if err := copyLoggingFlags(fs, &fileSettings.Logging); err != nil {
			return nil, err
		}
		s = fileSettings
	} else {
		o.applyModeDependentFlags(fs, s)
	}
	modeDefaulted := applyPlatformDefaults(s)

	if o.hostnameOverride != "" {
		name := strings.TrimSpace(o.hostnameOverride)
		if name == "" {
			return nil, fmt.Errorf("empty hostname-override is invalid")
		}
		// As upstream, the flag's value is lower-cased into the configuration (so
		// /configz shows it lower-cased); a file's value is kept as written.
		s.HostnameOverride = strings.ToLower(name)
	}

	root := field.NewPath("KubeProxyConfiguration")
	if err := o.featureGates.SetFromMap(s.FeatureGates); err != nil {
		// As upstream, a failure of Complete, not of validation: no field path.
		return nil, err
	}
	errs := validate(s, o.featureGates)
	if len(errs) == 0 && !o.Cleanup && o.WriteConfigTo == "" {
		// --cleanup (which removes every mode's rules) and --write-config-to work for
		// every upstream mode, as upstream; only running one needs it implemented.
		errs = validateRunnable(s.Mode, o.RunnableModes)
	}
	if s.HostnameOverride != "" && strings.TrimSpace(s.HostnameOverride) == "" {
		errs = append(errs, field.Invalid(root.Child("HostnameOverride"), s.HostnameOverride, "must not be only whitespace"))
	}
	if len(errs) > 0 {
		return nil, &ValidationError{Errs: errs}
	}

	cfg := o.normalise(s)
	cfg.ModeDefaulted = modeDefaulted
	cfg.Warnings = warnings
	cfg.Flags = flagValues(fs)
	return cfg, nil
}

// applyModeDependentFlags applies the flags that map to per-mode fields
// (upstream processV1Alpha1Flags): the --iptables-* periods apply to every
// mode but ipvs (so also to nftables, which has no flags of its own).
func (o *Options) applyModeDependentFlags(fs *pflag.FlagSet, s *settings) {
	ipvs := s.Mode == ProxyModeIPVS
	if fs.Changed("iptables-sync-period") && !ipvs {
		s.SyncPeriod.Duration = o.iptablesSyncPeriod
	}
	if fs.Changed("iptables-min-sync-period") && !ipvs {
		s.MinSyncPeriod.Duration = o.iptablesMinSyncPeriod
	}
	if fs.Changed("ipvs-sync-period") && ipvs {
		s.SyncPeriod.Duration = o.ipvsSyncPeriod
	}
	if fs.Changed("ipvs-min-sync-period") && ipvs {
		s.MinSyncPeriod.Duration = o.ipvsMinSyncPeriod
	}
	if fs.Changed("cluster-cidr") {
		s.DetectLocal.ClusterCIDRs = strings.Split(o.clusterCIDRs, ",")
	}
}

// addressFromDeprecatedFlag: port 0 disables the server; otherwise a bare IP gets the port.
func addressFromDeprecatedFlag(addr string, port int32) string {
	if port == 0 {
		return ""
	}
	return appendPortIfNeeded(addr, port)
}

// loadFile reads, decodes, defaults and converts a config file.
func loadFile(path string) (s *settings, lenientReason error, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading config file: %w", err)
	}
	obj, lenientReason, err := DecodeFile(data)
	if err != nil {
		return nil, nil, fmt.Errorf("config file %s: %w", path, err)
	}
	setV1Alpha1Defaults(obj)
	return fromV1Alpha1(obj), lenientReason, nil
}

// copyLoggingFlags applies the logging flags explicitly given on the command
// line on top of the file's logging settings, so that `--config f -v=5` works.
// --vmodule entries from the command line come first (they take priority).
func copyLoggingFlags(from *pflag.FlagSet, to *logsapi.LoggingConfiguration) error {
	var clone pflag.FlagSet
	logsapi.AddFlags(to, &clone)
	fileVModule := to.VModule
	to.VModule = nil
	var err error
	clone.VisitAll(func(f *pflag.Flag) {
		src := from.Lookup(f.Name)
		if err != nil || src == nil || !src.Changed {
			return
		}
		if setErr := f.Value.Set(src.Value.String()); setErr != nil {
			err = fmt.Errorf("copying flag %s value: %w", f.Name, setErr)
		}
	})
	to.VModule = append(to.VModule, fileVModule...)
	return err
}

// normalise turns validated settings into the Config the daemon consumes.
func (o *Options) normalise(s *settings) *Config {
	cfg := &Config{
		Mode:                        s.Mode,
		HostnameOverride:            strings.ToLower(strings.TrimSpace(s.HostnameOverride)),
		BindAddress:                 parseSpecifiedAddr(s.BindAddress),
		HealthzBindAddress:          s.HealthzBindAddress,
		MetricsBindAddress:          s.MetricsBindAddress,
		BindAddressHardFail:         s.BindAddressHardFail,
		EnableProfiling:             s.EnableProfiling,
		ShowHiddenMetricsForVersion: s.ShowHiddenMetricsForVersion,
		ClientConnection: ClientConnection{
			Kubeconfig:         s.ClientConnection.Kubeconfig,
			AcceptContentTypes: s.ClientConnection.AcceptContentTypes,
			ContentType:        s.ClientConnection.ContentType,
			QPS:                s.ClientConnection.QPS,
			Burst:              s.ClientConnection.Burst,
		},
		ConfigSyncPeriod: s.ConfigSyncPeriod.Duration,
		DetectLocalMode:  s.DetectLocalMode,
		ClusterCIDRs:     parsePrefixes(s.DetectLocal.ClusterCIDRs),
		DetectLocal: DetectLocal{
			BridgeInterface:     s.DetectLocal.BridgeInterface,
			InterfaceNamePrefix: s.DetectLocal.InterfaceNamePrefix,
		},
		NodePortAddresses:  append([]string(nil), s.NodePortAddresses...),
		OOMScoreAdj:        copyPtr(s.Linux.OOMScoreAdj),
		SyncPeriod:         s.SyncPeriod.Duration,
		MinSyncPeriod:      s.MinSyncPeriod.Duration,
		MasqueradeBit:      ptr.Deref(s.IPTables.MasqueradeBit, 14),
		MasqueradeAll:      s.Linux.MasqueradeAll,
		LocalhostNodePorts: ptr.Deref(s.IPTables.LocalhostNodePorts, true),
		Conntrack: Conntrack{
			MaxPerCore:            copyPtr(s.Linux.Conntrack.MaxPerCore),
			Min:                   copyPtr(s.Linux.Conntrack.Min),
			TCPEstablishedTimeout: durationPtr(s.Linux.Conntrack.TCPEstablishedTimeout),
			TCPCloseWaitTimeout:   durationPtr(s.Linux.Conntrack.TCPCloseWaitTimeout),
			TCPBeLiberal:          s.Linux.Conntrack.TCPBeLiberal,
			UDPTimeout:            s.Linux.Conntrack.UDPTimeout.Duration,
			UDPStreamTimeout:      s.Linux.Conntrack.UDPStreamTimeout.Duration,
		},
		IPVS: IPVS{
			Scheduler:     s.IPVS.Scheduler,
			ExcludeCIDRs:  parsePrefixes(s.IPVS.ExcludeCIDRs),
			StrictARP:     s.IPVS.StrictARP,
			TCPTimeout:    s.IPVS.TCPTimeout.Duration,
			TCPFinTimeout: s.IPVS.TCPFinTimeout.Duration,
			UDPTimeout:    s.IPVS.UDPTimeout.Duration,
		},
		FeatureGates: o.featureGates,
		Logging:      s.Logging,
		Master:       o.master,
		ConfigFile:   o.ConfigFile,
		Cleanup:      o.Cleanup,
		InitOnly:     o.InitOnly,
		V1Alpha1:     s.toV1Alpha1(),
	}
	if s.Mode == ProxyModeNFTables {
		cfg.MasqueradeBit = ptr.Deref(s.NFTables.MasqueradeBit, 14)
	}
	return cfg
}

// parseSpecifiedAddr parses a validated IP (leading zeros allowed, as
// upstream); unspecified addresses become the zero Addr.
func parseSpecifiedAddr(s string) netip.Addr {
	ip := netutils.ParseIPSloppy(s)
	if ip == nil || ip.IsUnspecified() {
		return netip.Addr{}
	}
	addr, _ := netip.AddrFromSlice(ip)
	return addr.Unmap()
}

// parsePrefixes parses CIDRs (sloppily, as upstream) into masked prefixes,
// dropping entries validation did not require to be valid.
func parsePrefixes(cidrs []string) []netip.Prefix {
	var out []netip.Prefix
	for _, c := range cidrs {
		_, ipnet, err := netutils.ParseCIDRSloppy(strings.TrimSpace(c))
		if err != nil {
			continue
		}
		addr, _ := netip.AddrFromSlice(ipnet.IP)
		ones, _ := ipnet.Mask.Size()
		out = append(out, netip.PrefixFrom(addr.Unmap(), ones))
	}
	return out
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func durationPtr(d *metav1.Duration) *time.Duration {
	if d == nil {
		return nil
	}
	v := d.Duration
	return &v
}

// flagValues snapshots every flag's current value, for /flagz.
func flagValues(fs *pflag.FlagSet) map[string]string {
	out := map[string]string{}
	fs.VisitAll(func(f *pflag.Flag) { out[f.Name] = f.Value.String() })
	return out
}
