package app

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/config"
	dpipt "github.com/kproxy/kproxy/internal/dataplane/iptables"
	"github.com/kproxy/kproxy/internal/health"
	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/sysctl"
)

func iptablesParams(family v1.IPFamily, cfg *config.Config, nodePortAddrs ...string) familyParams {
	if cfg.SyncPeriod == 0 {
		cfg.SyncPeriod = 30 * time.Second
	}
	cfg.MasqueradeBit = 14
	return familyParams{
		cfg:           cfg,
		family:        family,
		nodeName:      "node-a",
		nodePortAddrs: nodePortAddrs,
		state:         model.NewState(family, "node-a"),
		health:        health.NewProxyHealthServer(health.ProxyHealthConfig{}),
	}
}

// syncedRules builds the family on a Fake, syncs once and returns the filter table.
func syncedRules(t *testing.T, p familyParams, sys *sysctl.Fake) (string, *iptables.Fake) {
	t.Helper()
	fake := iptables.NewFake(p.family)
	fp, err := buildIPTablesFamily(context.Background(), p, fake, sys)
	if err != nil {
		t.Fatal(err)
	}
	defer fp.close()
	if _, err := fp.syncer.(*dpipt.Proxier).Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return fake.Dump(iptables.TableFilter) + fake.Dump(iptables.TableNAT), fake
}

// TestIPTablesLocalhostNodePorts follows upstream's NewProxier: localhost NodePorts
// apply to IPv4 when enabled and nodePortAddresses hold IPv4 loopback; they set
// route_localnet and add the martian drop.
func TestIPTablesLocalhostNodePorts(t *testing.T) {
	for _, tc := range []struct {
		name      string
		family    v1.IPFamily
		enabled   bool
		addrs     []string
		localhost bool
	}{
		{"default all addresses", v1.IPv4Protocol, true, nil, true},
		{"disabled", v1.IPv4Protocol, false, nil, false},
		{"loopback CIDR", v1.IPv4Protocol, true, []string{"127.0.0.0/8", "::1/128"}, true},
		{"no loopback", v1.IPv4Protocol, true, []string{"10.0.0.0/8"}, false},
		{"IPv6 never", v1.IPv6Protocol, true, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys := sysctl.NewFake(map[string]int{sysctlRouteLocalnet: 0})
			rules, _ := syncedRules(t, iptablesParams(tc.family, &config.Config{LocalhostNodePorts: tc.enabled}, tc.addrs...), sys)
			set, _ := sys.Get(sysctlRouteLocalnet)
			if (set == 1) != tc.localhost {
				t.Errorf("route_localnet = %d, want localhost NodePorts %v", set, tc.localhost)
			}
			if got := strings.Contains(rules, "block incoming localnet connections"); got != tc.localhost {
				t.Errorf("martian drop present = %v, want %v:\n%s", got, tc.localhost, rules)
			}
		})
	}
	t.Run("read-only sysctl is fatal, as upstream", func(t *testing.T) {
		sys := sysctl.NewFake(map[string]int{sysctlRouteLocalnet: 0})
		sys.SetReadOnly()
		p := iptablesParams(v1.IPv4Protocol, &config.Config{LocalhostNodePorts: true})
		if _, err := buildIPTablesFamily(context.Background(), p, iptables.NewFake(v1.IPv4Protocol), sys); err == nil {
			t.Error("no error when route_localnet cannot be set")
		}
	})
}

func TestIPTablesTCPBeLiberal(t *testing.T) {
	for _, liberal := range []int{0, 1} {
		sys := sysctl.NewFake(map[string]int{sysctlTCPBeLiberal: liberal})
		rules, _ := syncedRules(t, iptablesParams(v1.IPv4Protocol, &config.Config{}), sys)
		if got := strings.Contains(rules, "--ctstate INVALID -j DROP"); got != (liberal == 0) {
			t.Errorf("be_liberal=%d: INVALID drop present = %v", liberal, got)
		}
	}
}

// TestIPTablesCanaryMonitor: the family's part creates the canaries and, when they
// disappear, requests a full sync and triggers the runner.
func TestIPTablesCanaryMonitor(t *testing.T) {
	p := iptablesParams(v1.IPv4Protocol, &config.Config{SyncPeriod: 10 * time.Millisecond})
	fake := iptables.NewFake(v1.IPv4Protocol)
	fp, err := buildIPTablesFamily(context.Background(), p, fake, sysctl.NewFake(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer fp.close()
	proxier := fp.syncer.(*dpipt.Proxier)
	if _, err := proxier.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	restores := len(fake.Restores())

	ctx, cancel := context.WithCancel(context.Background())
	triggered := make(chan struct{}, 10)
	done := make(chan error, 1)
	go func() { done <- fp.run(ctx, func() { triggered <- struct{}{} }) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("monitor returned %v", err)
		}
	}()

	deadline := time.After(10 * time.Second)
	for !slices.Contains(fake.Chains(iptables.TableFilter), iptables.CanaryChain) {
		select {
		case <-deadline:
			t.Fatal("canary chains not created")
		case <-time.After(5 * time.Millisecond):
		}
	}
	for _, table := range canaryTables {
		for fake.HasChain(table, iptables.CanaryChain) {
			if err := fake.DeleteChain(context.Background(), table, iptables.CanaryChain); err != nil {
				t.Fatal(err)
			}
		}
	}
	select {
	case <-triggered:
	case <-deadline:
		t.Fatal("no sync triggered after the canaries disappeared")
	}
	if _, err := proxier.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if all := fake.Restores(); len(all) != restores+1 || !strings.Contains(all[len(all)-1], ":KUBE-SERVICES - [0:0]") {
		t.Errorf("the triggered sync was not a full one")
	}
}

func TestContainsIPv4Loopback(t *testing.T) {
	for addrs, want := range map[string]bool{
		"":                       true,
		"0.0.0.0/0":              true,
		"127.0.0.1/32":           true,
		"10.0.0.0/8":             false,
		"10.0.0.0/8,127.0.0.0/8": true,
		"::1/128":                true, // no IPv4 CIDR: all IPv4 addresses
	} {
		var list []string
		if addrs != "" {
			list = strings.Split(addrs, ",")
		}
		if got := newNodePortAddresses(v1.IPv4Protocol, list).containsIPv4Loopback(); got != want {
			t.Errorf("%q: got %v, want %v", addrs, got, want)
		}
	}
}
