package app

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	dpipt "github.com/kproxy/kproxy/internal/dataplane/iptables"
	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/model"
	rendeript "github.com/kproxy/kproxy/internal/render/iptables"
	"github.com/kproxy/kproxy/internal/sysctl"
)

// Sysctls the iptables proxier reads or writes, as upstream's.
const (
	sysctlRouteLocalnet = "net/ipv4/conf/all/route_localnet"
	sysctlTCPBeLiberal  = "net/netfilter/nf_conntrack_tcp_be_liberal"
)

// canaryTables are the tables the canary monitor watches, as upstream's.
var canaryTables = []iptables.Table{iptables.TableMangle, iptables.TableNAT, iptables.TableFilter}

// newIPTablesFamily builds one family's iptables proxier as upstream's NewProxier:
// it sets route_localnet when localhost NodePorts apply, reads whether conntrack is
// liberal, and returns the proxier with its canary monitor as an owned part. The
// family's iptables is the one the start-up check found usable (p.iptables).
func newIPTablesFamily(ctx context.Context, p familyParams) (*builtFamily, error) {
	if p.iptables == nil {
		return nil, fmt.Errorf("iptables mode: %s iptables is not usable on this node", p.family)
	}
	klog.FromContext(ctx).Info("Using iptables Proxier", "ipFamily", p.family, "backend", p.iptables.Backend())
	return buildIPTablesFamily(ctx, p, p.iptables, sysctl.New())
}

// buildIPTablesFamily is newIPTablesFamily past the choice of the iptables binaries.
func buildIPTablesFamily(ctx context.Context, p familyParams, ipt iptables.Interface, sys sysctl.Interface) (*builtFamily, error) {
	logger := klog.FromContext(ctx).WithValues("ipFamily", p.family)
	npa, localIPs, serviceHealth := p.nodePortsAndHealth()

	localhostNodePorts := p.cfg.LocalhostNodePorts && p.family == v1.IPv4Protocol && npa.containsIPv4Loopback()
	if localhostNodePorts {
		// NodePorts on 127.0.0.0/8 need route_localnet (kubernetes#90259); the
		// renderer adds the rule that drops martian packets it would let in.
		logger.Info("Setting route_localnet=1 to allow node-ports on localhost; to change this either disable iptables.localhostNodePorts (--iptables-localhost-nodeports) or set nodePortAddresses (--nodeport-addresses) to filter loopback addresses")
		if err := ensureSysctl(sys, sysctlRouteLocalnet, 1); err != nil {
			return nil, err
		}
	}
	tcpBeLiberal := false
	if val, err := sys.Get(sysctlTCPBeLiberal); err == nil && val != 0 {
		tcpBeLiberal = true
		logger.Info("nf_conntrack_tcp_be_liberal set, not installing DROP rules for INVALID packets")
	}

	renderCfg := rendeript.Config{
		Family:             p.family,
		NodePortAddresses:  model.NodePortAddresses{All: npa.all},
		LocalDetector:      localDetector(p.cfg, p.family, p.podCIDRs),
		MasqueradeBit:      p.cfg.MasqueradeBit,
		MasqueradeAll:      p.cfg.MasqueradeAll,
		NodeIP:             p.nodeIP,
		LocalhostNodePorts: localhostNodePorts,
		TCPBeLiberal:       tcpBeLiberal,
	}

	proxier, err := dpipt.New(dpipt.Config{
		Config: p.coreConfig(localIPs, serviceHealth),
		Render: renderCfg,
		IPT:    ipt,
		NFAcct: p.nfacct,
	})
	if err != nil {
		serviceHealth.Close()
		return nil, err
	}
	interval := p.cfg.SyncPeriod
	canaryMonitor := func(ctx context.Context, trigger func()) error {
		// The monitor logs the flush; the next sync rewrites every rule.
		reload := func() {
			proxier.RequestFullSync()
			trigger()
		}
		err := iptables.Monitor(ctx, ipt, iptables.CanaryChain, canaryTables, reload, interval)
		if err != nil && !errors.Is(err, context.Canceled) {
			// The monitor only repairs flushes faster than the periodic full sync:
			// losing it must not stop the proxy.
			logger.Error(err, "iptables canary monitor stopped")
		}
		return nil
	}
	run := func(ctx context.Context, trigger func()) error {
		g, ctx := errgroup.WithContext(ctx)
		g.Go(func() error { return proxier.RunDriftChecks(ctx, trigger) })
		g.Go(func() error { return canaryMonitor(ctx, trigger) })
		return g.Wait()
	}
	return &builtFamily{syncer: proxier, setServiceCIDRs: func([]netip.Prefix) {}, close: serviceHealth.Close, run: run}, nil
}

// ensureSysctl sets name to value unless it already has it, as upstream's
// proxyutil.EnsureSysctl.
func ensureSysctl(sys sysctl.Interface, name string, value int) error {
	if cur, err := sys.Get(name); err == nil && cur == value {
		return nil
	}
	if err := sys.Set(name, value); err != nil {
		return fmt.Errorf("can't set sysctl %s to %d: %w", name, value, err)
	}
	return nil
}

// containsIPv4Loopback is upstream's NodePortAddresses.ContainsIPv4Loopback for an
// IPv4 nodePortAddresses: all addresses, or a CIDR that is or holds loopback.
func (n nodePortAddresses) containsIPv4Loopback() bool {
	if n.all {
		return true
	}
	for _, c := range n.cidrs {
		if c.Addr().Is4() && (c.Addr().IsLoopback() || c.Contains(netip.AddrFrom4([4]byte{127, 0, 0, 0}))) {
			return true
		}
	}
	return false
}
