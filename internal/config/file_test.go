package config

import (
	"strings"
	"testing"
	"time"
)

func TestConfigFileErrors(t *testing.T) {
	tests := []struct {
		name string
		body string
		// want are substrings the error must contain (the field path first).
		want []string
	}{
		{"wrong apiVersion", "apiVersion: kubeproxy.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\nmode: iptables\n",
			[]string{`no kind "KubeProxyConfiguration" is registered for version "kubeproxy.config.k8s.io/v1beta1"`}},
		{"wrong kind", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n",
			[]string{`no kind "KubeletConfiguration" is registered`}},
		{"missing kind", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\n", []string{"Kind"}},
		{"bad duration", "nftables:\n  syncPeriod: abc\n", []string{`nftables.syncPeriod: time: invalid duration "abc"`}},
		{"bad integer", "conntrack:\n  maxPerCore: lots\n", []string{"conntrack.maxPerCore: "}},
		{"negative syncPeriod", "mode: nftables\nnftables:\n  syncPeriod: -1s\n",
			[]string{`KubeProxyConfiguration.SyncPeriod: Invalid value: "-1s": must be greater than 0`}},
		{"negative syncPeriod of iptables", "mode: iptables\niptables:\n  syncPeriod: -5s\n",
			[]string{`KubeProxyConfiguration.SyncPeriod: Invalid value: "-5s": must be greater than 0`}},
		{"negative minSyncPeriod of a blank mode (the iptables block)", "iptables:\n  minSyncPeriod: -1s\n",
			[]string{`KubeProxyConfiguration.MinSyncPeriod: Invalid value: "-1s": must be greater than or equal to 0`}},
		{"minSyncPeriod > syncPeriod", "mode: nftables\nnftables:\n  syncPeriod: 10s\n  minSyncPeriod: 1m\n",
			[]string{`KubeProxyConfiguration.SyncPeriod: Invalid value: "1m0s": must be greater than or equal to KubeProxyConfiguration.MinSyncPeriod`}},
		{"zero configSyncPeriod is defaulted, negative is not", "configSyncPeriod: -1m\n",
			[]string{`KubeProxyConfiguration.ConfigSyncPeriod: Invalid value: "-1m0s": must be greater than 0`}},
		{"nftables masqueradeBit", "mode: nftables\nnftables:\n  masqueradeBit: 32\n",
			[]string{`KubeProxyConfiguration.KubeProxyNFTablesConfiguration.MasqueradeBit: Invalid value: 32: must be within the range [0, 31]`}},
		{"iptables masqueradeBit checked in every mode", "iptables:\n  masqueradeBit: -1\n",
			[]string{`KubeProxyConfiguration.KubeProxyIPTablesConfiguration.MasqueradeBit: Invalid value: -1: must be within the range [0, 31]`}},
		{"bad mode", "mode: userspace\n",
			[]string{`KubeProxyConfiguration.Mode.ProxyMode: Invalid value: "userspace": must be iptables, ipvs, nftables or blank`}},
		{"windows mode", "mode: kernelspace\n", []string{`KubeProxyConfiguration.Mode.ProxyMode: Invalid value: "kernelspace"`}},
		{"ipvs disabled by gate", "mode: ipvs\nfeatureGates:\n  KubeProxyIPVS: false\n",
			[]string{`KubeProxyConfiguration.Mode.ProxyMode: Invalid value: "ipvs": must be iptables, nftables or blank`}},
		{"ipvs timeouts checked in ipvs mode", "mode: ipvs\nipvs:\n  tcpTimeout: -1s\n  excludeCIDRs: [bogus]\n",
			[]string{`KubeProxyConfiguration.KubeProxyIPVSConfiguration.TCPTimeout: Invalid value: "-1s"`, `KubeProxyConfiguration.KubeProxyIPVSConfiguration.ExcludeCidrs[0]: Invalid value: "bogus": must be a valid CIDR`}},
		{"bad clusterCIDR", "clusterCIDR: 10.0.0.0/33\n",
			[]string{`KubeProxyConfiguration.DetectLocalConfiguration.ClusterCIDRs[0]: Invalid value: "10.0.0.0/33": must be a valid CIDR block`}},
		{"clusterCIDR same family twice", "clusterCIDR: 10.0.0.0/8,10.1.0.0/16\n",
			[]string{`KubeProxyConfiguration.DetectLocalConfiguration.ClusterCIDRs: Invalid value: ["10.0.0.0/8","10.1.0.0/16"]: must be a either a single CIDR or dual-stack pair of CIDRs`}},
		{"three clusterCIDRs", "clusterCIDR: 10.0.0.0/8,fd00::/64,10.1.0.0/16\n",
			[]string{`KubeProxyConfiguration.DetectLocalConfiguration.ClusterCIDRs: Invalid value:`}},
		{"bridge interface required", "detectLocalMode: BridgeInterface\n",
			[]string{`KubeProxyConfiguration.DetectLocalConfiguration.InterfaceName: Invalid value: "": must not be empty`}},
		{"interface prefix required", "detectLocalMode: InterfaceNamePrefix\n",
			[]string{`KubeProxyConfiguration.DetectLocalConfiguration.InterfacePrefix: Invalid value: "": must not be empty`}},
		{"bad detectLocalMode", "detectLocalMode: Magic\n",
			[]string{`KubeProxyConfiguration.DetectLocalMode: Unsupported value: "Magic"`}},
		{"bad nodePortAddresses", "nodePortAddresses: [primary, 1.2.3.4, primary]\n",
			[]string{`KubeProxyConfiguration.NodePortAddresses[1]: Invalid value: "1.2.3.4": must be a valid CIDR or one of the keywords`, `KubeProxyConfiguration.NodePortAddresses[2]: Duplicate value: "primary"`}},
		{"bad bindAddress", "bindAddress: node1\n",
			[]string{`KubeProxyConfiguration.BindAddress: Invalid value: "node1": not a valid textual representation of an IP address`}},
		{"bad healthzBindAddress", "healthzBindAddress: 1.2.3.4:99999\n",
			[]string{`KubeProxyConfiguration.HealthzBindAddress: Invalid value: "99999": must be a valid port`}},
		{"bad metricsBindAddress", "metricsBindAddress: localhost:10249\n",
			[]string{`KubeProxyConfiguration.MetricsBindAddress: Invalid value: "localhost": must be a valid IP`}},
		{"bad oomScoreAdj", "oomScoreAdj: 1001\n",
			[]string{`KubeProxyConfiguration.KubeProxyLinuxConfiguration.OOMScoreAdj: Invalid value: 1001: must be within the range [-1000, 1000]`}},
		{"negative conntrack", "conntrack:\n  maxPerCore: -1\n  udpTimeout: -1s\n",
			[]string{`KubeProxyConfiguration.KubeProxyLinuxConfiguration.KubeProxyConntrackConfiguration.MaxPerCore: Invalid value: -1`, `KubeProxyConfiguration.KubeProxyLinuxConfiguration.KubeProxyConntrackConfiguration.UDPTimeout: Invalid value: "-1s"`}},
		{"negative burst", "clientConnection:\n  burst: -1\n",
			[]string{`KubeProxyConfiguration.ClientConnection.Burst: Invalid value: -1: must be greater than or equal to 0`}},
		{"hidden metrics version", "showHiddenMetricsForVersion: '1.30'\n",
			[]string{`KubeProxyConfiguration.ShowHiddenMetricsForVersion: Invalid value: "1.30"`, "'1.36'"}},
		{"unknown feature gate", "featureGates:\n  NoSuchGate: true\n",
			[]string{`unrecognized feature gate: NoSuchGate`}},
		{"locked feature gate", "featureGates:\n  MultiCIDRServiceAllocator: false\n",
			[]string{`cannot set feature gate MultiCIDRServiceAllocator to false, feature is locked to true`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := complete(t, writeConfig(t, tc.body))
			if err == nil {
				t.Fatalf("Complete succeeded (%+v); want error containing %q", cfg, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n does not contain %q", err, w)
				}
			}
		})
	}
}

func TestConfigFileLenientDecoding(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		warning  string
		wantMode ProxyMode
	}{
		{"unknown field", "mode: iptables\nnoSuchField: 1\n", `unknown field "noSuchField"`, ProxyModeIPTables},
		{"unknown nested field", "mode: iptables\niptables:\n  bogus: true\n", `unknown field "iptables.bogus"`, ProxyModeIPTables},
		{"duplicate field", "mode: nftables\nmode: iptables\n", `"mode" already set`, ProxyModeIPTables},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := complete(t, writeConfig(t, tc.body))
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if cfg.Mode != tc.wantMode {
				t.Errorf("Mode = %q, want %q", cfg.Mode, tc.wantMode)
			}
			if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0].Error(), tc.warning) {
				t.Errorf("Warnings = %v, want one containing %q", cfg.Warnings, tc.warning)
			}
		})
	}
}

func TestConfigFileValues(t *testing.T) {
	body := `mode: nftables
bindAddress: 10.0.0.1
hostnameOverride: Node-1
clusterCIDR: 10.244.0.0/16,fd00:10:244::/56
nodePortAddresses: [primary, 192.168.0.0/16]
healthzBindAddress: 10.0.0.1
metricsBindAddress: "::1"
nftables:
  syncPeriod: 1m
  minSyncPeriod: 5s
  masqueradeBit: 10
  masqueradeAll: true
iptables:
  syncPeriod: 2m
  masqueradeAll: false
conntrack:
  tcpCloseWaitTimeout: 0s
featureGates:
  KubeProxyNFTablesLocalhostNodePorts: true
logging:
  verbosity: 3
`
	cfg, err := complete(t, writeConfig(t, body))
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name     string
		got, exp any
	}{
		{"HostnameOverride", cfg.HostnameOverride, "node-1"},
		{"BindAddress", cfg.BindAddress.String(), "10.0.0.1"},
		{"ClusterCIDRs", len(cfg.ClusterCIDRs), 2},
		{"NodePortAddresses", strings.Join(cfg.NodePortAddresses, ","), "primary,192.168.0.0/16"},
		{"HealthzBindAddress", cfg.HealthzBindAddress, "10.0.0.1:10256"},
		{"MetricsBindAddress", cfg.MetricsBindAddress, "[::1]:10249"},
		{"SyncPeriod", cfg.SyncPeriod, time.Minute},
		{"MinSyncPeriod", cfg.MinSyncPeriod, 5 * time.Second},
		{"MasqueradeBit", cfg.MasqueradeBit, int32(10)},
		{"MasqueradeAll", cfg.MasqueradeAll, true},
		{"TCPCloseWaitTimeout", *cfg.Conntrack.TCPCloseWaitTimeout, time.Duration(0)},
		{"gate", cfg.FeatureGates.Enabled(KubeProxyNFTablesLocalhostNodePorts), true},
		{"verbosity", int(cfg.Logging.Verbosity), 3},
	}
	for _, c := range checks {
		if c.got != c.exp {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.exp)
		}
	}
}

// TestKubeadmConfigMap reads the config.conf of kubeadm's kube-proxy ConfigMap
// (mode "", with an edited iptables block): as upstream, a blank mode is iptables
// and reads the iptables block, and nodePortAddresses stays unset (every local IP).
func TestKubeadmConfigMap(t *testing.T) {
	cfg, err := complete(t, "--config=testdata/kubeadm-config.conf")
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name     string
		got, exp any
	}{
		{"Mode", cfg.Mode, ProxyModeIPTables},
		{"ModeDefaulted", cfg.ModeDefaulted, true},
		{"SyncPeriod", cfg.SyncPeriod, 45 * time.Second},
		{"MinSyncPeriod", cfg.MinSyncPeriod, 2 * time.Second},
		{"MasqueradeAll", cfg.MasqueradeAll, true},
		{"NodePortAddresses", len(cfg.NodePortAddresses), 0},
		{"Kubeconfig", cfg.ClientConnection.Kubeconfig, "/var/lib/kube-proxy/kubeconfig.conf"},
		{"effective iptables.syncPeriod", cfg.V1Alpha1.IPTables.SyncPeriod.Duration, 45 * time.Second},
		{"effective iptables.masqueradeAll", cfg.V1Alpha1.IPTables.MasqueradeAll, true},
		{"effective nftables.syncPeriod", cfg.V1Alpha1.NFTables.SyncPeriod.Duration, time.Duration(0)},
	}
	for _, c := range checks {
		if c.got != c.exp {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.exp)
		}
	}
}
