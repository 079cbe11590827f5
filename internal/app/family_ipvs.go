package app

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
	utilexec "k8s.io/utils/exec"

	"github.com/kproxy/kproxy/internal/config"
	dpipvs "github.com/kproxy/kproxy/internal/dataplane/ipvs"
	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/ipvs"
	"github.com/kproxy/kproxy/internal/ipvs/dummy"
	"github.com/kproxy/kproxy/internal/model"
	renderipvs "github.com/kproxy/kproxy/internal/render/ipvs"
	"github.com/kproxy/kproxy/internal/sysctl"
)

// ipvsDeprecationMessage is upstream's, logged as an error and recorded as a
// Warning Event (IPVSDeprecation) at every start in ipvs mode.
const ipvsDeprecationMessage = "The ipvs proxier has been deprecated and will be disabled by default in Kubernetes 1.40 and removed in Kubernetes 1.43. Migrate to the 'nftables' proxier instead."

// The sysctls upstream's ipvs proxier sets (pkg/proxy/ipvs NewProxier), in the
// node's network namespace.
const (
	sysctlVSConnTrack             = "net/ipv4/vs/conntrack"
	sysctlConnReuse               = "net/ipv4/vs/conn_reuse_mode"
	sysctlExpireNoDestConn        = "net/ipv4/vs/expire_nodest_conn"
	sysctlExpireQuiescentTemplate = "net/ipv4/vs/expire_quiescent_template"
	sysctlForward                 = "net/ipv4/ip_forward"
	sysctlArpIgnore               = "net/ipv4/conf/all/arp_ignore"
	sysctlArpAnnounce             = "net/ipv4/conf/all/arp_announce"
)

// checkIPVS is upstream's start-up check of the ipvs mode (CanUseIPVSProxier,
// after loading ip_vs as upstream's IPVS handle does): ipset at least 6.0, and a
// virtual server with the configured scheduler accepted by the kernel.
func checkIPVS(ctx context.Context, cfg *config.Config) error {
	if err := ipvs.LoadModule(ctx, utilexec.New()); err != nil {
		klog.FromContext(ctx).V(2).Info("Loading ip_vs failed; it may be built in", "err", err)
	}
	h := ipvs.New("")
	defer func() { _ = h.Close() }()
	if err := ipvs.CanUse(ctx, h, ipset.New(nil), cfg.IPVS.Scheduler); err != nil {
		return fmt.Errorf("can't use the IPVS proxier: %w", err)
	}
	return nil
}

// newIPVSFamily builds one family's ipvs proxier as upstream's NewProxier: the vs
// sysctls (and strictARP's), IPVS's timeouts when set, and the proxier over the
// kernel's IPVS, kube-ipvs0, ipsets and the family's iptables, with graceful
// termination and the periodic drift check as its owned parts.
func newIPVSFamily(ctx context.Context, p familyParams) (*builtFamily, error) {
	if p.iptables == nil {
		return nil, fmt.Errorf("ipvs mode: %s iptables is not usable on this node", p.family)
	}
	logger := klog.FromContext(ctx).WithValues("ipFamily", p.family)
	if err := ipvsSysctls(ctx, sysctl.New(), p.cfg.IPVS.StrictARP); err != nil {
		return nil, err
	}
	h := ipvs.New("")
	if t := p.cfg.IPVS; t.TCPTimeout > 0 || t.TCPFinTimeout > 0 || t.UDPTimeout > 0 {
		if err := h.SetTimeouts(ipvs.Timeouts{TCP: t.TCPTimeout, TCPFin: t.TCPFinTimeout, UDP: t.UDPTimeout}); err != nil {
			logger.Error(err, "Failed to configure IPVS timeouts")
		}
	}
	npa, localIPs, serviceHealth := p.nodePortsAndHealth()
	var exclude []netip.Prefix
	for _, c := range p.cfg.IPVS.ExcludeCIDRs {
		if model.InFamily(c.Addr(), p.family) {
			exclude = append(exclude, c)
		}
	}
	graceful := ipvs.NewGracefulTermination(h, nil, 0)
	proxier, err := dpipvs.New(dpipvs.Config{
		Config: p.coreConfig(localIPs, serviceHealth),
		Render: renderipvs.Config{
			Family:            p.family,
			Scheduler:         p.cfg.IPVS.Scheduler,
			MasqueradeAll:     p.cfg.MasqueradeAll,
			MasqueradeBit:     p.cfg.MasqueradeBit,
			LocalDetector:     localDetector(p.cfg, p.family, p.podCIDRs),
			NodePortAddresses: model.NodePortAddresses{All: npa.all},
			NodeIP:            p.nodeIP,
		},
		IPVS:         h,
		IPSet:        ipset.New(nil),
		Link:         dummy.New(""),
		IPT:          p.iptables,
		Graceful:     graceful,
		ExcludeCIDRs: exclude,
	})
	if err != nil {
		serviceHealth.Close()
		_ = h.Close()
		return nil, err
	}
	run := func(ctx context.Context, trigger func()) error {
		g, ctx := errgroup.WithContext(ctx)
		g.Go(func() error { return graceful.Run(ctx) })
		g.Go(func() error { return proxier.RunDriftChecks(ctx, trigger) })
		return g.Wait()
	}
	closeAll := func() {
		serviceHealth.Close()
		_ = h.Close()
	}
	return &builtFamily{syncer: proxier, setServiceCIDRs: func([]netip.Prefix) {}, close: closeAll, run: run}, nil
}

// ipvsSysctls sets upstream's sysctls of the ipvs mode: conn_reuse_mode=0 only on
// kernels from 4.1 to 5.8 (kubernetes#93297: later ones fixed the delay it
// avoids), and the ARP ones with strictARP.
func ipvsSysctls(ctx context.Context, sys sysctl.Interface, strictARP bool) error {
	if err := ensureSysctl(sys, sysctlVSConnTrack, 1); err != nil {
		return err
	}
	major, minor := kernelRelease()
	switch {
	case major < 4 || major == 4 && minor < 1:
		klog.FromContext(ctx).Error(nil, "Can't set sysctl, kernel version doesn't satisfy minimum version requirements", "sysctl", sysctlConnReuse, "minimumKernelVersion", "4.1")
	case major > 5 || major == 5 && minor >= 9:
		klog.FromContext(ctx).V(2).Info("Left as-is", "sysctl", sysctlConnReuse)
	default:
		if err := ensureSysctl(sys, sysctlConnReuse, 0); err != nil {
			return err
		}
	}
	for _, s := range []struct {
		name  string
		value int
	}{{sysctlExpireNoDestConn, 1}, {sysctlExpireQuiescentTemplate, 1}, {sysctlForward, 1}} {
		if err := ensureSysctl(sys, s.name, s.value); err != nil {
			return err
		}
	}
	if strictARP {
		if err := ensureSysctl(sys, sysctlArpIgnore, 1); err != nil {
			return err
		}
		if err := ensureSysctl(sys, sysctlArpAnnounce, 2); err != nil {
			return err
		}
	}
	return nil
}

// kernelRelease is the running kernel's major and minor version (0, 0 when it
// cannot be read).
func kernelRelease() (major, minor int) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return 0, 0
	}
	release := unix.ByteSliceToString(u.Release[:])
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return 0, 0
	}
	major, _ = strconv.Atoi(parts[0])
	minor, _ = strconv.Atoi(strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	return major, minor
}
