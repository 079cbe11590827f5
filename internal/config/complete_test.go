package config

import (
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"k8s.io/utils/ptr"
)

// complete parses args like the command does and resolves them.
func complete(t *testing.T, args ...string) (*Config, error) {
	t.Helper()
	fg, err := NewFeatureGate()
	if err != nil {
		t.Fatalf("NewFeatureGate: %v", err)
	}
	o := NewOptions(fg)
	fs := pflag.NewFlagSet("kube-proxy", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return o.Complete(fs)
}

// writeConfig writes a config file body (apiVersion/kind prepended unless
// the body sets them) and returns --config=path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	if !strings.Contains(body, "apiVersion:") {
		body = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n" + body
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return "--config=" + path
}

func TestDefaultsPerMode(t *testing.T) {
	common := func(c *Config) {
		c.HealthzBindAddress = "0.0.0.0:10256"
		c.MetricsBindAddress = "127.0.0.1:10249"
		c.ClientConnection = ClientConnection{ContentType: "application/vnd.kubernetes.protobuf", QPS: 5, Burst: 10}
		c.ConfigSyncPeriod = 15 * time.Minute
		c.DetectLocalMode = LocalModeClusterCIDR
		c.OOMScoreAdj = ptr.To[int32](-999)
		c.SyncPeriod = 30 * time.Second
		c.MinSyncPeriod = time.Second
		c.MasqueradeBit = 14
		c.LocalhostNodePorts = true
		c.Conntrack = Conntrack{
			MaxPerCore:            ptr.To[int32](32768),
			Min:                   ptr.To[int32](131072),
			TCPEstablishedTimeout: ptr.To(24 * time.Hour),
			TCPCloseWaitTimeout:   ptr.To(time.Hour),
		}
	}
	tests := []struct {
		name string
		args []string
		want func(*Config)
	}{
		{"no flags: iptables, as upstream", nil, func(c *Config) {
			c.Mode, c.ModeDefaulted = ProxyModeIPTables, true
		}},
		{"explicit nftables", []string{"--proxy-mode=nftables"}, func(c *Config) {
			c.Mode = ProxyModeNFTables
			c.NodePortAddresses = []string{"primary"}
		}},
		{"iptables keeps upstream defaults", []string{"--proxy-mode=iptables"}, func(c *Config) {
			c.Mode = ProxyModeIPTables
		}},
		{"empty file: iptables, as upstream", []string{"CONFIG:"}, func(c *Config) {
			c.Mode, c.ModeDefaulted = ProxyModeIPTables, true
		}},
		{"file iptables", []string{"CONFIG:mode: iptables\n"}, func(c *Config) {
			c.Mode = ProxyModeIPTables
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if len(args) == 1 && strings.HasPrefix(args[0], "CONFIG:") {
				args = []string{writeConfig(t, strings.TrimPrefix(args[0], "CONFIG:"))}
			}
			got, err := complete(t, args...)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			want := &Config{}
			common(want)
			tc.want(want)
			if diff := cmp.Diff(want, got, cmpConfig...); diff != "" {
				t.Errorf("Config (-want +got):\n%s", diff)
			}
		})
	}
}

// cmpConfig compares the daemon-facing fields only.
var cmpConfig = []cmp.Option{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
	cmp.FilterPath(func(p cmp.Path) bool {
		switch p.Last().String() {
		case ".FeatureGates", ".Logging", ".V1Alpha1", ".Flags", ".Warnings", ".ConfigFile":
			return true
		}
		return false
	}, cmp.Ignore()),
}

func TestFlagsNormalised(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, c *Config)
	}{
		{"iptables periods apply to nftables", []string{"--proxy-mode=nftables", "--iptables-sync-period=10s", "--iptables-min-sync-period=2s"}, func(t *testing.T, c *Config) {
			if c.SyncPeriod != 10*time.Second || c.MinSyncPeriod != 2*time.Second {
				t.Errorf("periods = %v/%v", c.SyncPeriod, c.MinSyncPeriod)
			}
			if c.V1Alpha1.NFTables.SyncPeriod.Duration != 10*time.Second {
				t.Errorf("v1alpha1 nftables.syncPeriod = %v", c.V1Alpha1.NFTables.SyncPeriod)
			}
		}},
		{"ipvs periods ignored outside ipvs", []string{"--ipvs-sync-period=10s"}, func(t *testing.T, c *Config) {
			if c.SyncPeriod != 30*time.Second {
				t.Errorf("SyncPeriod = %v", c.SyncPeriod)
			}
		}},
		{"healthz-port 0 disables", []string{"--healthz-port=0"}, func(t *testing.T, c *Config) {
			if c.HealthzBindAddress != "" {
				t.Errorf("HealthzBindAddress = %q", c.HealthzBindAddress)
			}
		}},
		{"ports join bare IPs", []string{"--healthz-bind-address=1.2.3.4", "--healthz-port=1234", "--metrics-bind-address=::1", "--metrics-port=999"}, func(t *testing.T, c *Config) {
			if c.HealthzBindAddress != "1.2.3.4:1234" || c.MetricsBindAddress != "[::1]:999" {
				t.Errorf("addresses = %q %q", c.HealthzBindAddress, c.MetricsBindAddress)
			}
		}},
		{"bind address parsed", []string{"--bind-address=10.0.0.5"}, func(t *testing.T, c *Config) {
			if c.BindAddress != netip.MustParseAddr("10.0.0.5") {
				t.Errorf("BindAddress = %v", c.BindAddress)
			}
		}},
		{"unspecified bind address is zero", []string{"--bind-address=::"}, func(t *testing.T, c *Config) {
			if c.BindAddress.IsValid() {
				t.Errorf("BindAddress = %v", c.BindAddress)
			}
		}},
		{"cluster cidrs parsed and masked", []string{"--cluster-cidr=10.1.2.3/16,fd00::/48"}, func(t *testing.T, c *Config) {
			want := []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("fd00::/48")}
			if diff := cmp.Diff(want, c.ClusterCIDRs, cmpConfig...); diff != "" {
				t.Error(diff)
			}
			if c.V1Alpha1.ClusterCIDR != "10.1.2.3/16,fd00::/48" {
				t.Errorf("v1alpha1 clusterCIDR = %q", c.V1Alpha1.ClusterCIDR)
			}
		}},
		{"hostname override trimmed and lowered", []string{"--hostname-override= Node-A "}, func(t *testing.T, c *Config) {
			if c.HostnameOverride != "node-a" {
				t.Errorf("HostnameOverride = %q", c.HostnameOverride)
			}
			if c.V1Alpha1.HostnameOverride != "node-a" {
				t.Errorf("effective hostnameOverride = %q, want it lower-cased as upstream's /configz", c.V1Alpha1.HostnameOverride)
			}
		}},
		{"masquerade bit of nftables block", []string{"--proxy-mode=nftables", "--iptables-masquerade-bit=3"}, func(t *testing.T, c *Config) {
			// As upstream, --iptables-masquerade-bit only sets iptables.masqueradeBit.
			if c.MasqueradeBit != 14 {
				t.Errorf("MasqueradeBit = %d", c.MasqueradeBit)
			}
		}},
		{"masquerade bit of iptables block", []string{"--proxy-mode=iptables", "--iptables-masquerade-bit=3", "--masquerade-all", "--iptables-localhost-nodeports=false"}, func(t *testing.T, c *Config) {
			if c.MasqueradeBit != 3 || !c.MasqueradeAll || c.LocalhostNodePorts {
				t.Errorf("MasqueradeBit=%d MasqueradeAll=%v LocalhostNodePorts=%v", c.MasqueradeBit, c.MasqueradeAll, c.LocalhostNodePorts)
			}
		}},
		{"conntrack", []string{"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=1h", "--conntrack-udp-timeout=30s", "--conntrack-tcp-be-liberal"}, func(t *testing.T, c *Config) {
			if *c.Conntrack.MaxPerCore != 0 || *c.Conntrack.TCPEstablishedTimeout != time.Hour || c.Conntrack.UDPTimeout != 30*time.Second || !c.Conntrack.TCPBeLiberal {
				t.Errorf("Conntrack = %+v", c.Conntrack)
			}
		}},
		{"feature gates applied", []string{"--feature-gates=KubeProxyNFTablesLocalhostNodePorts=true,InPlacePodVerticalScaling=true"}, func(t *testing.T, c *Config) {
			if !c.FeatureGates.Enabled(KubeProxyNFTablesLocalhostNodePorts) {
				t.Error("gate not enabled")
			}
		}},
		{"master and flags recorded", []string{"--master=https://127.0.0.1:6443", "--kube-api-qps=50"}, func(t *testing.T, c *Config) {
			if c.Master != "https://127.0.0.1:6443" || c.ClientConnection.QPS != 50 {
				t.Errorf("Master=%q QPS=%v", c.Master, c.ClientConnection.QPS)
			}
			if c.Flags["kube-api-qps"] != "50" || c.Flags["master"] != "https://127.0.0.1:6443" {
				t.Errorf("Flags = %v", c.Flags)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := complete(t, tc.args...)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			tc.check(t, c)
		})
	}
}

func TestDefaultGates(t *testing.T) {
	fg, err := NewFeatureGate()
	if err != nil {
		t.Fatal(err)
	}
	for gate, want := range map[string]bool{
		"KubeProxyIPVS": true, "KubeProxyNFTablesLocalhostNodePorts": false, "AllowServiceExternalIPs": true,
		"MultiCIDRServiceAllocator": true, "PreferSameTrafficDistribution": true, "NFTablesNetlink": true,
		"ContextualLogging": true, "LoggingAlphaOptions": false, "LoggingBetaOptions": true,
	} {
		if got := fg.Enabled(featureName(gate)); got != want {
			t.Errorf("%s = %v, want %v", gate, got, want)
		}
	}
	if err := fg.SetFromMap(map[string]bool{"MultiCIDRServiceAllocator": false}); err == nil {
		t.Error("locked gate MultiCIDRServiceAllocator could be disabled")
	}
}

// TestModeNotRunnable: a valid mode the build does not run fails validation with
// the field path, as a build restricted with RunnableModes would.
func TestModeNotRunnable(t *testing.T) {
	fg, err := NewFeatureGate()
	if err != nil {
		t.Fatal(err)
	}
	o := NewOptions(fg)
	o.RunnableModes = []ProxyMode{ProxyModeNFTables, ProxyModeIPTables}
	fs := pflag.NewFlagSet("kube-proxy", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--proxy-mode=ipvs"}); err != nil {
		t.Fatal(err)
	}
	_, err = o.Complete(fs)
	want := `KubeProxyConfiguration.Mode.ProxyMode: Invalid value: "ipvs": proxy mode "ipvs" is not implemented by this build`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want one containing %q", err, want)
	}
	if cfg, err := complete(t, "--proxy-mode=ipvs"); err != nil || cfg.Mode != ProxyModeIPVS {
		t.Errorf("the default build refuses ipvs mode: %v", err)
	}
}
