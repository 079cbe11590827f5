package app

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/config"
)

// upstreamFlags are the 55 flags upstream kube-proxy v1.37.2 registers: the
// 47 of cmd/kube-proxy/app/options.go AddFlags and the 8 of component-base
// logsapi.AddFlags (with the json format registered). --help and --version come
// on top. (The pinned upstream binary has no cAdvisor --boot-id-file or
// --machine-id-file, so neither does kproxy.)
var upstreamFlags = []string{
	"config", "write-config-to", "cleanup", "feature-gates",
	"kubeconfig", "master", "kube-api-content-type", "kube-api-burst", "kube-api-qps",
	"hostname-override", "bind-address", "healthz-bind-address", "metrics-bind-address",
	"bind-address-hard-fail", "profiling", "show-hidden-metrics-for-version", "init-only", "proxy-mode",
	"iptables-masquerade-bit", "masquerade-all", "iptables-localhost-nodeports",
	"iptables-sync-period", "iptables-min-sync-period",
	"ipvs-sync-period", "ipvs-min-sync-period", "ipvs-scheduler", "ipvs-exclude-cidrs", "ipvs-strict-arp",
	"ipvs-tcp-timeout", "ipvs-tcpfin-timeout", "ipvs-udp-timeout",
	"detect-local-mode", "pod-bridge-interface", "pod-interface-name-prefix", "cluster-cidr",
	"nodeport-addresses", "oom-score-adj", "conntrack-max-per-core", "conntrack-min",
	"conntrack-tcp-timeout-established", "conntrack-tcp-timeout-close-wait", "conntrack-tcp-be-liberal",
	"conntrack-udp-timeout", "conntrack-udp-timeout-stream", "config-sync-period",
	"healthz-port", "metrics-port",
	"logging-format", "log-flush-frequency", "v", "vmodule",
	"log-text-split-stream", "log-text-info-buffer-size", "log-json-split-stream", "log-json-info-buffer-size",
}

// deprecatedFlags are hidden from --help (MarkDeprecated) but still accepted.
var deprecatedFlags = map[string]bool{"healthz-port": true, "metrics-port": true}

type result struct {
	cfg    *config.Config
	ran    bool
	stdout string
	stderr string
	err    error
}

// execute runs the command with args; logging is not applied to the process.
func execute(t *testing.T, args ...string) result {
	t.Helper()
	var r result
	run := func(_ context.Context, cfg *config.Config) error {
		r.cfg, r.ran = cfg, true
		return nil
	}
	// Logging is validated as the command does, but never applied to the process.
	validateLogging := func(s *commandSettings) {
		s.applyLogging = func(c *logsapi.LoggingConfiguration, fg featuregate.FeatureGate) error {
			return logsapi.Validate(c, fg, field.NewPath("logging")).ToAggregate()
		}
	}
	cmd := NewCommand(run, validateLogging)
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs(args)
	r.err = cmd.Execute()
	r.stdout, r.stderr = stdout.String(), stderr.String()
	return r
}

func TestHelpListsUpstreamFlags(t *testing.T) {
	if len(upstreamFlags) != 55 {
		t.Fatalf("upstreamFlags has %d entries, want 55", len(upstreamFlags))
	}
	r := execute(t, "--help")
	if r.err != nil || r.ran {
		t.Fatalf("--help: err=%v ran=%v", r.err, r.ran)
	}
	for _, name := range append(upstreamFlags, "help", "version") {
		listed := strings.Contains(r.stdout, "--"+name+" ") || strings.Contains(r.stdout, "--"+name+"\n")
		if deprecatedFlags[name] {
			if listed {
				t.Errorf("deprecated --%s is listed in --help", name)
			}
			continue
		}
		if !listed {
			t.Errorf("--help does not list --%s", name)
		}
	}
	if !strings.Contains(r.stdout, "-v, --v Level") {
		t.Error("--help does not list -v shorthand")
	}

	cmd := NewCommand(nil)
	for _, name := range upstreamFlags {
		if cmd.Flags().Lookup(name) == nil {
			t.Errorf("flag --%s is not registered", name)
		}
	}
	for name := range deprecatedFlags {
		if cmd.Flags().Lookup(name).Deprecated == "" {
			t.Errorf("--%s is not marked deprecated", name)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, tc := range []struct{ arg, want string }{
		{"--version", "Kubernetes " + config.Version + "\n"},
		{"--version=true", "Kubernetes " + config.Version + "\n"},
		{"--version=raw", "GitVersion:\"" + config.Version + "\""},
	} {
		r := execute(t, tc.arg)
		if r.err != nil || r.ran || !strings.Contains(r.stdout, tc.want) {
			t.Errorf("%s: err=%v ran=%v stdout=%q, want %q", tc.arg, r.err, r.ran, r.stdout, tc.want)
		}
	}
	if r := execute(t, "--version=false"); r.err != nil || !r.ran {
		t.Errorf("--version=false: err=%v ran=%v", r.err, r.ran)
	}
	// As verflag: --version=vX.Y.Z... sets the reported version and runs the proxy;
	// it must keep the binary's major, minor and patch.
	dynamic := strings.SplitN(config.Version, "-", 2)[0] + "-custom.1"
	if r := execute(t, "--version="+dynamic); r.err != nil || !r.ran || r.cfg.Version != dynamic {
		t.Errorf("--version=%s: err=%v ran=%v", dynamic, r.err, r.ran)
	}
	if r := execute(t, "--version="+dynamic, "--version"); r.err != nil || r.stdout != "Kubernetes "+dynamic+"\n" {
		t.Errorf("--version=%s --version: err=%v stdout=%q", dynamic, r.err, r.stdout)
	}
	if r := execute(t); r.err != nil || r.cfg.Version != config.Version {
		t.Errorf("no --version: reported %q, want %q", r.cfg.Version, config.Version)
	}
	for _, bad := range []string{"v1.99.0", "vx", "maybe"} {
		if r := execute(t, "--version="+bad); r.err == nil || r.ran {
			t.Errorf("--version=%s accepted", bad)
		}
	}
}

// TestExecuteReportsErrorsAsCLIRun: flag errors are plain text on stderr, errors once
// the flags were parsed go through klog (component-base's cli.Run).
func TestExecuteReportsErrorsAsCLIRun(t *testing.T) {
	failing := func(context.Context, *config.Config) error { return errors.New("boom") }
	noLogging := func(s *commandSettings) {
		s.applyLogging = func(*logsapi.LoggingConfiguration, featuregate.FeatureGate) error { return nil }
	}
	var stderr bytes.Buffer
	cmd := NewCommand(failing, noLogging)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--no-such-flag"})
	if code := Execute(context.Background(), cmd, &stderr); code != 1 || !strings.Contains(stderr.String(), "Error: unknown flag: --no-such-flag") {
		t.Errorf("flag error: code %d, stderr %q", code, stderr.String())
	}

	var logged bytes.Buffer
	klog.SetOutput(&logged)
	klog.LogToStderr(false)
	defer klog.LogToStderr(true)
	stderr.Reset()
	cmd = NewCommand(failing, noLogging)
	cmd.SetArgs(nil)
	if code := Execute(context.Background(), cmd, &stderr); code != 1 || stderr.Len() != 0 {
		t.Errorf("run error: code %d, stderr %q (want it logged, not printed)", code, stderr.String())
	}
	klog.Flush()
	if !strings.Contains(logged.String(), `"command failed" err="boom"`) {
		t.Errorf("klog output %q lacks the command failure", logged.String())
	}
}

func TestCommandErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"positional argument", []string{"foo"}, `"kube-proxy" does not take any arguments, got ["foo"]`},
		{"unknown flag", []string{"--no-such-flag"}, "unknown flag: --no-such-flag"},
		{"bad IP flag", []string{"--bind-address=node1"}, `invalid argument "node1" for "--bind-address" flag: "node1" is not a valid IP address`},
		{"bad ip:port flag", []string{"--healthz-bind-address=1.2.3.4:http"}, `invalid argument "1.2.3.4:http" for "--healthz-bind-address" flag`},
		{"bad duration flag", []string{"--iptables-sync-period=soon"}, `invalid argument "soon" for "--iptables-sync-period" flag`},
		{"negative sync period", []string{"--iptables-sync-period=-1s"}, `KubeProxyConfiguration.SyncPeriod: Invalid value: "-1s": must be greater than 0`},
		{"min > sync", []string{"--iptables-sync-period=1s", "--iptables-min-sync-period=2s"}, `KubeProxyConfiguration.SyncPeriod: Invalid value: "2s": must be greater than or equal to KubeProxyConfiguration.MinSyncPeriod`},
		{"bad mode", []string{"--proxy-mode=userspace"}, `KubeProxyConfiguration.Mode.ProxyMode: Invalid value: "userspace"`},
		{"unrunnable mode with a bad field still names the field", []string{"--proxy-mode=ipvs", "--ipvs-tcp-timeout=-1s"}, `KubeProxyConfiguration.KubeProxyIPVSConfiguration.TCPTimeout: Invalid value: "-1s"`},
		{"bad masquerade bit", []string{"--iptables-masquerade-bit=32"}, `KubeProxyConfiguration.KubeProxyIPTablesConfiguration.MasqueradeBit: Invalid value: 32: must be within the range [0, 31]`},
		{"bad cluster CIDR", []string{"--cluster-cidr=10.0.0.0/40"}, `KubeProxyConfiguration.DetectLocalConfiguration.ClusterCIDRs[0]: Invalid value: "10.0.0.0/40"`},
		{"cluster CIDRs of one family", []string{"--cluster-cidr=fd00::/64,fd01::/64"}, `KubeProxyConfiguration.DetectLocalConfiguration.ClusterCIDRs: Invalid value: ["fd00::/64","fd01::/64"]`},
		{"bad nodeport address", []string{"--nodeport-addresses=10.0.0.1"}, `KubeProxyConfiguration.NodePortAddresses[0]: Invalid value: "10.0.0.1"`},
		{"unknown feature gate", []string{"--feature-gates=NoSuchGate=true"}, `failed complete: unrecognized feature gate: NoSuchGate`},
		{"bad feature gate value", []string{"--feature-gates=KubeProxyIPVS=maybe"}, `invalid argument "KubeProxyIPVS=maybe" for "--feature-gates" flag`},
		{"metrics-port 0 empties a required address", []string{"--metrics-port=0"}, `KubeProxyConfiguration.MetricsBindAddress: Invalid value: "": must be IP:port`},
		{"blank hostname override", []string{"--hostname-override=  "}, "empty hostname-override is invalid"},
		{"missing config file", []string{"--config=/nonexistent/kube-proxy.yaml"}, "failed complete: reading config file"},
		{"bad logging format", []string{"--logging-format=xml"}, `initialize logging: logging.format: Invalid value: "xml"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := execute(t, tc.args...)
			if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", r.err, tc.want)
			}
			if r.ran {
				t.Error("run was called despite the error")
			}
		})
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kube-proxy.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFlagsVersusConfigFile pins upstream's precedence: with --config the file
// wins over every flag except logging flags, --hostname-override and --master.
func TestFlagsVersusConfigFile(t *testing.T) {
	file := writeFile(t, `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: from-file
clusterCIDR: 10.0.0.0/8
iptables:
  syncPeriod: 20s
  masqueradeBit: 5
logging:
  verbosity: 2
  vmodule:
  - filePattern: file
    verbosity: 1
`)
	r := execute(t, "--config="+file,
		"--proxy-mode=nftables", "--iptables-sync-period=5s", "--iptables-masquerade-bit=7",
		"--cluster-cidr=192.168.0.0/16", "--healthz-port=0", "--feature-gates=NoSuchGate=true",
		"--hostname-override=From-Flag", "--master=https://10.0.0.1:6443", "-v=5", "--vmodule=flag=4")
	if r.err != nil {
		t.Fatal(r.err)
	}
	c := r.cfg
	checks := []struct {
		name     string
		got, exp any
	}{
		{"Mode (file)", c.Mode, config.ProxyModeIPTables},
		{"SyncPeriod (file)", c.SyncPeriod.String(), "20s"},
		{"MasqueradeBit (file)", c.MasqueradeBit, int32(5)},
		{"ClusterCIDRs (file)", c.ClusterCIDRs[0].String(), "10.0.0.0/8"},
		{"HealthzBindAddress (file default, port flag ignored)", c.HealthzBindAddress, "0.0.0.0:10256"},
		{"HostnameOverride (flag)", c.HostnameOverride, "from-flag"},
		{"Master (flag)", c.Master, "https://10.0.0.1:6443"},
		{"Verbosity (flag)", int(c.Logging.Verbosity), 5},
		{"VModule (flag first, then file)", len(c.Logging.VModule), 2},
		{"VModule[0]", c.Logging.VModule[0].FilePattern, "flag"},
	}
	for _, ch := range checks {
		if ch.got != ch.exp {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.exp)
		}
	}
}

// TestWriteConfigRoundTrip: --write-config-to writes the effective
// configuration; reading it back with --config yields the same Config.
func TestWriteConfigRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"defaults", nil},
		{"iptables", []string{"--proxy-mode=iptables", "--iptables-sync-period=45s", "--iptables-min-sync-period=2s", "--masquerade-all", "--iptables-localhost-nodeports=false"}},
		{"nftables tuned", []string{"--proxy-mode=nftables", "--iptables-sync-period=1m", "--nodeport-addresses=primary,10.0.0.0/8",
			"--cluster-cidr=10.244.0.0/16,fd00::/56", "--bind-address=10.0.0.3", "--metrics-bind-address=0.0.0.0:10249",
			"--conntrack-max-per-core=0", "--conntrack-udp-timeout=10s", "--oom-score-adj=-500",
			"--feature-gates=KubeProxyNFTablesLocalhostNodePorts=true", "--kube-api-qps=20", "--kube-api-burst=40",
			"--detect-local-mode=InterfaceNamePrefix", "--pod-interface-name-prefix=veth", "--profiling",
			"--show-hidden-metrics-for-version=1.36", "-v=4", "--hostname-override=node-a"}},
	}
	// Logging and V1Alpha1 hold resource.Quantity values (unexported fields);
	// they are compared through their YAML form instead.
	opts := cmp.Options{
		cmpopts.IgnoreFields(config.Config{}, "Flags", "FeatureGates", "ConfigFile", "ModeDefaulted", "Warnings", "Logging", "V1Alpha1"),
		cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{}),
	}
	// Not round-tripped, as upstream: a zero minSyncPeriod (or any zero
	// duration that has a default) is written as 0s and defaulted on reading.
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := execute(t, tc.args...)
			if before.err != nil {
				t.Fatal(before.err)
			}
			path := filepath.Join(t.TempDir(), "written.yaml")
			w := execute(t, append(tc.args, "--write-config-to="+path)...)
			if w.err != nil || w.ran {
				t.Fatalf("--write-config-to: err=%v ran=%v", w.err, w.ran)
			}
			after := execute(t, "--config="+path)
			if after.err != nil {
				t.Fatal(after.err)
			}
			if len(after.cfg.Warnings) != 0 {
				t.Errorf("written file needed lenient decoding: %v", after.cfg.Warnings)
			}
			if diff := cmp.Diff(before.cfg, after.cfg, opts); diff != "" {
				t.Errorf("Config differs after round trip (-flags +file):\n%s", diff)
			}
			if diff := cmp.Diff(encode(t, before.cfg), encode(t, after.cfg)); diff != "" {
				t.Errorf("effective v1alpha1 differs after round trip (-flags +file):\n%s", diff)
			}
			written, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(encode(t, before.cfg), string(written)); diff != "" {
				t.Errorf("written file is not the effective configuration (-effective +written):\n%s", diff)
			}
		})
	}
}

func encode(t *testing.T, cfg *config.Config) string {
	t.Helper()
	data, err := config.EncodeYAML(cfg.V1Alpha1)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestRunErrorReturned(t *testing.T) {
	want := errors.New("boom")
	cmd := NewCommand(func(context.Context, *config.Config) error { return want }, func(s *commandSettings) {
		s.applyLogging = func(*logsapi.LoggingConfiguration, featuregate.FeatureGate) error { return nil }
	})
	cmd.SetArgs(nil)
	if err := cmd.Execute(); !errors.Is(err, want) {
		t.Errorf("Execute = %v, want %v", err, want)
	}
}

func TestRunnableModesOption(t *testing.T) {
	cmd := NewCommand(func(context.Context, *config.Config) error { return nil },
		WithRunnableModes(config.ProxyModeNFTables),
		func(s *commandSettings) {
			s.applyLogging = func(*logsapi.LoggingConfiguration, featuregate.FeatureGate) error { return nil }
		})
	cmd.SetArgs([]string{"--proxy-mode=iptables"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), `proxy mode "iptables" is not implemented`) {
		t.Errorf("Execute = %v", err)
	}
}

func TestSubcommandsKeepRootFlags(t *testing.T) {
	var subRan bool
	var rootCfg *config.Config
	cmd := NewCommand(func(_ context.Context, cfg *config.Config) error { rootCfg = cfg; return nil }, func(s *commandSettings) {
		s.applyLogging = func(*logsapi.LoggingConfiguration, featuregate.FeatureGate) error { return nil }
	})
	cmd.AddCommand(&cobra.Command{Use: "sub", RunE: func(*cobra.Command, []string) error { subRan = true; return nil }})
	cmd.SetArgs([]string{"--proxy-mode=iptables", "--iptables-sync-period=10s"})
	if err := cmd.Execute(); err != nil || rootCfg == nil || rootCfg.Mode != config.ProxyModeIPTables {
		t.Fatalf("root: err=%v cfg=%v", err, rootCfg)
	}
	cmd.SetArgs([]string{"sub"})
	if err := cmd.Execute(); err != nil || !subRan {
		t.Fatalf("sub: err=%v ran=%v", err, subRan)
	}
}

func TestUnderscoreFlagsNormalised(t *testing.T) {
	r := execute(t, "--proxy_mode=iptables", "--iptables_sync_period=12s")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.cfg.Mode != config.ProxyModeIPTables || r.cfg.SyncPeriod.String() != "12s" {
		t.Errorf("Mode=%v SyncPeriod=%v", r.cfg.Mode, r.cfg.SyncPeriod)
	}
}

func TestCleanupAndInitOnlyReachRun(t *testing.T) {
	for _, tc := range []struct {
		arg               string
		cleanup, initOnly bool
	}{
		{"--cleanup", true, false},
		{"--init-only", false, true},
	} {
		r := execute(t, tc.arg)
		if r.err != nil || !r.ran {
			t.Fatalf("%s: err=%v ran=%v", tc.arg, r.err, r.ran)
		}
		if r.cfg.Cleanup != tc.cleanup || r.cfg.InitOnly != tc.initOnly {
			t.Errorf("%s: Cleanup=%v InitOnly=%v", tc.arg, r.cfg.Cleanup, r.cfg.InitOnly)
		}
	}
}
