package app

import (
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/config"
)

func prefixList(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ss))
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// Cases of upstream's Test_checkBadConfig. Upstream checks the already-expanded
// nodePortAddresses; here the raw and expanded lists are the same unless stated.
func TestCheckBadConfig(t *testing.T) {
	cases := []struct {
		name          string
		clusterCIDRs  []string
		nodePortAddrs []string
		expanded      []string // defaults to nodePortAddrs
		podCIDRs      []string
		primary       v1.IPFamily
		wantErr       string // substring; "" means no error
	}{
		{name: "single-stack NodePortAddresses with single-stack config", clusterCIDRs: []string{"10.0.0.0/8"},
			nodePortAddrs: []string{"192.168.0.0/24"}, primary: v1.IPv4Protocol},
		{name: "dual-stack NodePortAddresses with dual-stack config", clusterCIDRs: []string{"10.0.0.0/8", "fd09::/64"},
			nodePortAddrs: []string{"192.168.0.0/24", "fd03::/64"}, primary: v1.IPv4Protocol},
		{name: "empty NodePortAddresses", nodePortAddrs: []string{}, primary: v1.IPv4Protocol,
			wantErr: "nodePortAddresses is unset"},
		{name: "single-stack NodePortAddresses with dual-stack config", clusterCIDRs: []string{"10.0.0.0/8", "fd09::/64"},
			nodePortAddrs: []string{"192.168.0.0/24"}, primary: v1.IPv4Protocol,
			wantErr: "cluster appears to be dual-stack but nodePortAddresses contains only IPv4 addresses; NodePort connections will be accepted on all local IPv6 IPs"},
		{name: "wrong-single-stack NodePortAddresses", clusterCIDRs: []string{"fd09::/64"},
			nodePortAddrs: []string{"192.168.0.0/24"}, primary: v1.IPv6Protocol,
			wantErr: "cluster appears to be IPv6-primary but nodePortAddresses contains only IPv4 addresses; NodePort connections will be accepted on all local IPv6 IPs"},

		// Beyond upstream's table.
		{name: "dual-stack pod CIDRs make the cluster dual-stack", nodePortAddrs: []string{"192.168.0.0/24"},
			podCIDRs: []string{"10.0.0.0/24", "fd10::/64"}, primary: v1.IPv4Protocol, wantErr: "appears to be dual-stack"},
		{name: "dual-stack nodePortAddresses alone are fine", nodePortAddrs: []string{"192.168.0.0/24", "fd03::/64"}, primary: v1.IPv6Protocol},
		{name: "primary keyword expanded on a dual-stack node", nodePortAddrs: []string{config.NodePortAddressesPrimary},
			expanded: []string{"192.168.0.2/32", "fd00::2/128"}, clusterCIDRs: []string{"10.0.0.0/8", "fd09::/64"}, primary: v1.IPv4Protocol},
		{name: "primary keyword expanded on a single-stack node", nodePortAddrs: []string{config.NodePortAddressesPrimary},
			expanded: []string{"192.168.0.2/32"}, clusterCIDRs: []string{"10.0.0.0/8"}, primary: v1.IPv4Protocol},
		{name: "all keyword", nodePortAddrs: []string{config.NodePortAddressesAll},
			expanded: []string{"0.0.0.0/0", "::/0"}, primary: v1.IPv4Protocol},
		// Upstream replaces nodePortAddresses by its expansion before the check, so a
		// "primary" without any non-loopback node IP reads as "unset" there; here the
		// raw list is not empty, so another warning is given. Both warn.
		{name: "primary keyword without node IPs", nodePortAddrs: []string{config.NodePortAddressesPrimary},
			expanded: []string{}, primary: v1.IPv4Protocol, wantErr: "nodePortAddresses"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{ClusterCIDRs: prefixList(tc.clusterCIDRs...), NodePortAddresses: tc.nodePortAddrs}
			expanded := tc.expanded
			if expanded == nil {
				expanded = tc.nodePortAddrs
			}
			err := checkBadConfig(cfg, tc.primary, expanded, tc.podCIDRs)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Errorf("no error, want one containing %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Errorf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

// Cases of upstream's Test_checkBadIPConfig, except winkernel.sourceVip and
// ipvs.excludeCIDRs, which kproxy's Config does not carry (Linux nftables only).
func TestCheckBadIPConfig(t *testing.T) {
	cases := []struct {
		name               string
		cfg                config.Config
		podCIDRs           []string
		primary            v1.IPFamily
		ssErr, ssFatal     bool
		dsErr, dsFatal     bool
		wantSingleStackMsg string
	}{
		{name: "empty config", primary: v1.IPv4Protocol},
		{name: "ok single-stack clusterCIDR", cfg: config.Config{ClusterCIDRs: prefixList("10.0.0.0/8")}, primary: v1.IPv4Protocol},
		{name: "ok dual-stack clusterCIDR", cfg: config.Config{ClusterCIDRs: prefixList("10.0.0.0/8", "fd01:2345::/64")}, primary: v1.IPv4Protocol},
		{name: "ok reversed dual-stack clusterCIDR", cfg: config.Config{ClusterCIDRs: prefixList("fd01:2345::/64", "10.0.0.0/8")}, primary: v1.IPv4Protocol},
		{name: "wrong-family clusterCIDR", cfg: config.Config{ClusterCIDRs: prefixList("fd01:2345::/64")}, primary: v1.IPv4Protocol,
			ssErr: true, dsErr: true, wantSingleStackMsg: "cluster is IPv4-only but clusterCIDRs contains only IPv6 addresses"},
		{name: "wrong-family clusterCIDR when using ClusterCIDR LocalDetector",
			cfg:     config.Config{ClusterCIDRs: prefixList("fd01:2345::/64"), DetectLocalMode: config.LocalModeClusterCIDR},
			primary: v1.IPv4Protocol, ssErr: true, ssFatal: true, dsErr: true, dsFatal: false},
		{name: "ok single-stack node.spec.podCIDRs", cfg: config.Config{DetectLocalMode: config.LocalModeNodeCIDR},
			podCIDRs: []string{"10.0.0.0/8"}, primary: v1.IPv4Protocol},
		{name: "ok dual-stack node.spec.podCIDRs", cfg: config.Config{DetectLocalMode: config.LocalModeNodeCIDR},
			podCIDRs: []string{"10.0.0.0/8", "fd01:2345::/64"}, primary: v1.IPv4Protocol},
		{name: "ok reversed dual-stack node.spec.podCIDRs", cfg: config.Config{DetectLocalMode: config.LocalModeNodeCIDR},
			podCIDRs: []string{"fd01:2345::/64", "10.0.0.0/8"}, primary: v1.IPv4Protocol},
		{name: "wrong-family node.spec.podCIDRs", cfg: config.Config{DetectLocalMode: config.LocalModeNodeCIDR},
			podCIDRs: []string{"fd01:2345::/64"}, primary: v1.IPv4Protocol, ssErr: true, ssFatal: true, dsErr: true, dsFatal: true,
			wantSingleStackMsg: "cluster is IPv4-only but node.spec.podCIDRs contains only IPv6 addresses"},
		{name: "wrong-family node.spec.podCIDRs in another mode", podCIDRs: []string{"fd01:2345::/64"}, primary: v1.IPv4Protocol,
			ssErr: true, dsErr: true},
		{name: "ok IPv4 metricsBindAddress", cfg: config.Config{MetricsBindAddress: "10.0.0.1:9999"}, primary: v1.IPv4Protocol},
		{name: "ok IPv6 metricsBindAddress", cfg: config.Config{MetricsBindAddress: "[fd01:2345::1]:9999"}, primary: v1.IPv6Protocol},
		{name: "ok unspecified wrong-family metricsBindAddress", cfg: config.Config{MetricsBindAddress: "0.0.0.0:9999"}, primary: v1.IPv6Protocol},
		{name: "wrong family metricsBindAddress", cfg: config.Config{MetricsBindAddress: "10.0.0.1:9999"}, primary: v1.IPv6Protocol,
			ssErr: true, wantSingleStackMsg: "cluster is IPv6-only but metricsBindAddress is IPv4"},
		{name: "wrong family healthzBindAddress", cfg: config.Config{HealthzBindAddress: "[fd01::1]:10256"}, primary: v1.IPv4Protocol,
			ssErr: true, wantSingleStackMsg: "cluster is IPv4-only but healthzBindAddress is IPv6"},
		{name: "unparsable bind address is not a family problem", cfg: config.Config{HealthzBindAddress: "nonsense"}, primary: v1.IPv4Protocol},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err, fatal := checkBadIPConfig(&tc.cfg, tc.primary, false, tc.podCIDRs)
			if (err != nil) != tc.ssErr {
				t.Errorf("single-stack: error %v, want error=%v", err, tc.ssErr)
			} else if fatal != tc.ssFatal {
				t.Errorf("single-stack: fatal=%v, want %v", fatal, tc.ssFatal)
			}
			if tc.wantSingleStackMsg != "" && (err == nil || !strings.Contains(err.Error(), tc.wantSingleStackMsg)) {
				t.Errorf("single-stack: error %v, want it to contain %q", err, tc.wantSingleStackMsg)
			}

			err, fatal = checkBadIPConfig(&tc.cfg, tc.primary, true, tc.podCIDRs)
			if (err != nil) != tc.dsErr {
				t.Errorf("dual-stack: error %v, want error=%v", err, tc.dsErr)
			} else if fatal != tc.dsFatal {
				t.Errorf("dual-stack: fatal=%v, want %v", fatal, tc.dsFatal)
			}
			if err != nil && !strings.Contains(err.Error(), "-primary") {
				t.Errorf("dual-stack: error %q does not name the cluster %s-primary", err, tc.primary)
			}
		})
	}
}
