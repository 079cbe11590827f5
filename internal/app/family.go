package app

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/config"
	"github.com/kproxy/kproxy/internal/conntrack"
	dpnft "github.com/kproxy/kproxy/internal/dataplane/nftables"
	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
	"github.com/kproxy/kproxy/internal/health"
	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/localnodeports"
	"github.com/kproxy/kproxy/internal/metrics"
	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/nfacct"
	"github.com/kproxy/kproxy/internal/nftnetlink"
	render "github.com/kproxy/kproxy/internal/render/nftables"
	"github.com/kproxy/kproxy/internal/syncer"
)

var timeNow = time.Now

// familyParams is what building one family's proxier needs.
type familyParams struct {
	cfg           *config.Config
	family        v1.IPFamily
	nodeName      string
	nodeIP        netip.Addr
	podCIDRs      []string
	nodePortAddrs []string // expanded
	state         *model.State
	metrics       *metrics.FamilyMetrics
	health        *health.ProxyHealthServer
	recorder      events.EventRecorder
	// largeTransaction bounds the memory of full syncs (the daemon's GC scope).
	largeTransaction func(ops int) (done func())
	// nfacct holds the iptables mode's packet counters (shared by the families).
	nfacct nfacct.Interface
	// iptables is the family's usable iptables (iptables mode; see backendFamilies).
	iptables *iptables.Exec
}

// builtFamily is one family's proxier as the daemon drives it.
type builtFamily struct {
	syncer          syncer.Syncer
	setServiceCIDRs func([]netip.Prefix)
	close           func()
	// run, when set, is a part the daemon runs until ctx is done (once other modes'
	// leftovers are gone); trigger requests a sync.
	run func(ctx context.Context, trigger func()) error
}

// newFamilyProxier builds the proxier of the configured mode for one family.
func newFamilyProxier(ctx context.Context, p familyParams) (*builtFamily, error) {
	switch p.cfg.Mode {
	case config.ProxyModeNFTables:
		return newNFTablesFamily(ctx, p)
	case config.ProxyModeIPTables:
		return newIPTablesFamily(ctx, p)
	case config.ProxyModeIPVS:
		return newIPVSFamily(ctx, p)
	default:
		return nil, fmt.Errorf("proxy mode %q is not supported by this build of kproxy", p.cfg.Mode)
	}
}

func newNFTablesFamily(ctx context.Context, p familyParams) (*builtFamily, error) {
	nftFamily := knftables.IPv4Family
	if p.family == v1.IPv6Protocol {
		nftFamily = knftables.IPv6Family
	}
	nft, writer, err := nftablesWriter(nftFamily, p.cfg.FeatureGates.Enabled(config.NFTablesNetlink), p.largeTransaction)
	if err != nil {
		return nil, err
	}
	klog.FromContext(ctx).Info("Using nftables Proxier", "ipFamily", p.family, "writer", writer)

	npa, localIPs, serviceHealth := p.nodePortsAndHealth()
	renderCfg := render.Config{
		Family:            nftFamily,
		NodePortAddresses: model.NodePortAddresses{All: npa.all},
		LocalDetector:     localDetector(p.cfg, p.family, p.podCIDRs),
		MasqueradeBit:     p.cfg.MasqueradeBit,
		MasqueradeAll:     p.cfg.MasqueradeAll,
		NodeIP:            p.nodeIP,
		// Endpoints in shared maps: replacing an endpoint changes map elements only,
		// which the kernel applies without re-validating the table (docs/nftables.md).
		EndpointMaps:       true,
		LocalhostNodePorts: localhostNodePorts(p),
	}
	// Drift detection reads the table over netlink whichever writer writes it:
	// reading changes nothing, and nft's listings take seconds at 10,000 Services.
	reader, ok := nft.(*nftnetlink.Executor)
	if !ok {
		if reader, err = nftnetlink.New(nftFamily, render.TableName, nftnetlink.Options{}); err != nil {
			return nil, err
		}
	}
	dpCfg := dpnft.Config{
		Config:      p.coreConfig(localIPs, serviceHealth),
		Render:      renderCfg,
		NFT:         nft,
		FullSync:    p.fullSyncScope(),
		Inventories: reader,
	}
	// Localhost NodePorts (KubeProxyNFTablesLocalhostNodePorts): the userspace
	// listeners follow every successful sync and run as the family's own part.
	var listeners *localnodeports.Manager
	if renderCfg.LocalhostNodePorts.Proxied {
		klog.FromContext(ctx).Info("Serving TCP NodePorts on localhost with a userspace proxy", "ipFamily", p.family,
			"address", localnodeports.ListenAddress(p.family))
		listeners = localnodeports.New(localnodeports.Config{Family: p.family, Metrics: p.metrics})
		tracker := localnodeports.NewTracker(p.family, p.state, listeners)
		dpCfg.AfterSync = func(_ context.Context, full bool, changed, deleted []model.ServicePortName) {
			tracker.Synced(full, changed, deleted)
		}
	}

	proxier, err := dpnft.New(dpCfg)
	if err != nil {
		serviceHealth.Close()
		return nil, err
	}
	built := &builtFamily{syncer: proxier, setServiceCIDRs: proxier.SetServiceCIDRs, close: serviceHealth.Close}
	built.run = func(ctx context.Context, trigger func()) error {
		g, ctx := errgroup.WithContext(ctx)
		g.Go(func() error { return proxier.MonitorTable(ctx, reader.TableExists, dpnft.TableCheckInterval, trigger) })
		g.Go(func() error { return proxier.RunDriftChecks(ctx, trigger) })
		if listeners != nil {
			g.Go(func() error { return listeners.Run(ctx) })
		}
		return g.Wait()
	}
	return built, nil
}

// localhostNodePorts is upstream's decision for one family: with the
// KubeProxyNFTablesLocalhostNodePorts gate, localhost NodePorts of the protocols
// nothing serves are rejected and counted, and the userspace proxy serves TCP ones
// when nodePortAddresses explicitly includes loopback for the family.
func localhostNodePorts(p familyParams) render.LocalhostNodePorts {
	if !p.cfg.FeatureGates.Enabled(config.KubeProxyNFTablesLocalhostNodePorts) {
		return render.LocalhostNodePorts{}
	}
	return render.LocalhostNodePorts{Enabled: true, Proxied: localnodeports.ServesLoopback(p.family, p.nodePortAddrs)}
}

// localhostNodePortCounters reads the localhost NodePort reject counters of the
// kube-proxy table of both families through nft, for
// kubeproxy_nftables_localhost_nodeport_rejected_packets_total (nftables mode with
// the gate), as upstream's collector; nil, leaving the metric unregistered, when no
// family's nft client can be created.
func localhostNodePortCounters(ctx context.Context) metrics.NFTablesCounterLister {
	clients := map[v1.IPFamily]knftables.Interface{}
	for family, nftFamily := range map[v1.IPFamily]knftables.Family{v1.IPv4Protocol: knftables.IPv4Family, v1.IPv6Protocol: knftables.IPv6Family} {
		nft, err := knftables.New(nftFamily, render.TableName)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Failed to initialize nftables client for metrics", "ipFamily", family)
			continue
		}
		clients[family] = nft
	}
	return metrics.NFTablesCounterReader(clients)
}

// fullSyncScope adapts the daemon's GC scope to the proxier's FullSync hook (nil
// when there is none).
func (p familyParams) fullSyncScope() func() (done func()) {
	if p.largeTransaction == nil {
		return nil
	}
	return func() func() { return p.largeTransaction(0) }
}

// nodePortsAndHealth resolves the family's NodePort addresses: the setting, a
// function listing the local addresses that serve NodePorts now, and the service
// health check server listening on those addresses (every mode serves
// healthCheckNodePorts where it serves NodePorts).
// coreConfig is what the proxier of either mode is configured with besides its
// renderer and writer.
func (p familyParams) coreConfig(localIPs func() ([]netip.Addr, error), serviceHealth *health.ServiceHealthServer) proxycore.Config {
	return proxycore.Config{
		Family:        p.family,
		State:         p.state,
		NodePortIPs:   localIPs,
		Conntrack:     conntrack.New(),
		Metrics:       p.metrics,
		Health:        p.health,
		ServiceHealth: serviceHealth,
		Recorder:      p.recorder,
		// The background comparison of the kernel with what was applied runs once
		// per sync period, so that a third party's change is repaired within one.
		DriftCheckPeriod: p.cfg.SyncPeriod,
	}
}

func (p familyParams) nodePortsAndHealth() (nodePortAddresses, func() ([]netip.Addr, error), *health.ServiceHealthServer) {
	npa := newNodePortAddresses(p.family, p.nodePortAddrs)
	localIPs := func() ([]netip.Addr, error) {
		addrs, err := localAddresses()
		if err != nil {
			return nil, err
		}
		return npa.match(addrs), nil
	}
	var healthAddrs []netip.Addr
	if !npa.all {
		// Errors surface again at the first sync; health checks start on what we have.
		healthAddrs, _ = localIPs()
	}
	serviceHealth := health.NewServiceHealthServer(health.ServiceHealthConfig{
		NodeName:    p.nodeName,
		Recorder:    p.recorder,
		Family:      p.family,
		Addresses:   healthAddrs,
		ProxyHealth: p.health,
	})
	return npa, localIPs, serviceHealth
}

// WriterEnv selects how nftables transactions reach the kernel, overriding the
// NFTablesNetlink feature gate: "netlink" sends each transaction as one nfnetlink
// batch; "nft" pipes its text to the nft command. Both are atomic and write identical
// rulesets (internal/nftnetlink's equivalence tests); netlink is about twice as fast
// (see docs/nftables.md). The tests use it to run a suite with each writer.
const WriterEnv = "KPROXY_NFTABLES_WRITER"

// nftablesWriter returns the knftables.Interface that writes the kube-proxy table of
// family. The NFTablesNetlink gate (beta, on by default, as upstream) chooses netlink;
// with it off kproxy talks to the kernel through the nft command only, as upstream
// does then. The nft command is required either way: knftables checks it is usable
// (1.0.1 or later), and it serves listings.
// largeTx is called around large (full-sync) transactions of the netlink writer.
func nftablesWriter(family knftables.Family, netlinkGate bool, largeTx func(int) func()) (knftables.Interface, string, error) {
	nft, err := knftables.New(family, render.TableName)
	if err != nil {
		return nil, "", fmt.Errorf("nftables mode needs the nft command (1.0.1 or later): %w", err)
	}
	writer, err := nftablesWriterKind(os.Getenv(WriterEnv), netlinkGate)
	if err != nil {
		return nil, "", err
	}
	if writer == "netlink" {
		ex, err := nftnetlink.New(family, render.TableName, nftnetlink.Options{Lister: nft, LargeTransaction: largeTx})
		return ex, writer, err
	}
	return nft, writer, nil
}

// nftablesWriterKind is the writer to use: WriterEnv's value when set, else the
// NFTablesNetlink gate's choice.
func nftablesWriterKind(env string, netlinkGate bool) (string, error) {
	switch env {
	case "netlink", "nft":
		return env, nil
	case "":
		if netlinkGate {
			return "netlink", nil
		}
		return "nft", nil
	}
	return "", fmt.Errorf("%s=%q: must be netlink or nft", WriterEnv, env)
}

// localDetector maps detectLocalMode to the renderer's detector for one family, as
// upstream's getLocalDetectors: a CIDR mode without a CIDR of this family detects
// nothing.
func localDetector(cfg *config.Config, family v1.IPFamily, podCIDRs []string) model.LocalDetector {
	firstOfFamily := func(prefixes []netip.Prefix) []netip.Prefix {
		for _, p := range prefixes {
			if p.Addr().Is6() == (family == v1.IPv6Protocol) {
				return []netip.Prefix{p.Masked()}
			}
		}
		return nil
	}
	switch cfg.DetectLocalMode {
	case config.LocalModeClusterCIDR:
		if cidrs := firstOfFamily(cfg.ClusterCIDRs); cidrs != nil {
			return model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: cidrs}
		}
	case config.LocalModeNodeCIDR:
		var parsed []netip.Prefix
		for _, s := range podCIDRs {
			if p, err := netip.ParsePrefix(s); err == nil {
				parsed = append(parsed, p)
			}
		}
		if cidrs := firstOfFamily(parsed); cidrs != nil {
			return model.LocalDetector{Mode: model.DetectNodeCIDR, CIDRs: cidrs}
		}
	case config.LocalModeBridgeInterface:
		return model.LocalDetector{Mode: model.DetectBridgeInterface, BridgeInterface: cfg.DetectLocal.BridgeInterface}
	case config.LocalModeInterfaceNamePrefix:
		return model.LocalDetector{Mode: model.DetectInterfaceNamePrefix, InterfaceNamePrefix: cfg.DetectLocal.InterfaceNamePrefix}
	}
	return model.LocalDetector{Mode: model.DetectNone}
}

// localAddresses lists the addresses of this network namespace's interfaces.
func localAddresses() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("listing interface addresses: %w", err)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}
