package cleanup

import (
	"context"
	"errors"

	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	utilexec "k8s.io/utils/exec"

	"github.com/kproxy/kproxy/internal/config"
	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/iptables"
)

// Deps are the boundaries the cleanup acts through. The zero value acts on
// the host (the caller's network namespace) with the real tools.
type Deps struct {
	// Exec runs iptables*, ipset and the backend probes; nil means the host.
	Exec utilexec.Interface
	// IPTablesBackend picks the iptables binaries; empty means
	// iptables.DetectBackend. Ignored when IPTables is set.
	IPTablesBackend iptables.Backend
	// IPTables are the iptables instances to clean, one per family; nil
	// means IPv4 and IPv6 through Exec with IPTablesBackend.
	IPTables []iptables.Interface
	// NewNFTables opens the kube-proxy table of a family; nil means
	// knftables.New.
	NewNFTables NFTablesFactory
	// Links looks up and deletes kube-ipvs0; nil means netlink in the
	// caller's namespace.
	Links Links
	// IPVS flushes IPVS virtual servers; nil means internal/ipvs's Netlink
	// in the caller's namespace, opened for the cleanup only.
	IPVS IPVS
	// IPSets destroys the ipvs proxier's sets; nil means internal/ipset's
	// Exec (the ipset binary) through Exec.
	IPSets IPSets
}

func (d Deps) withDefaults() Deps {
	if d.Exec == nil {
		d.Exec = utilexec.New()
	}
	if d.NewNFTables == nil {
		d.NewNFTables = NewKnftables
	}
	if d.Links == nil {
		d.Links = &netlink.Handle{}
	}
	if d.IPSets == nil {
		d.IPSets = ipset.New(d.Exec)
	}
	return d
}

// iptablesFamilies resolves the iptables instances, detecting the backend
// only when needed (it runs save commands).
func (d Deps) iptablesFamilies(ctx context.Context) []iptables.Interface {
	if d.IPTables != nil {
		return d.IPTables
	}
	backend := d.IPTablesBackend
	if backend == "" {
		backend = iptables.DetectBackend(ctx, d.Exec)
		klog.FromContext(ctx).V(2).Info("Detected iptables backend", "backend", backend)
	}
	return []iptables.Interface{
		iptables.New(d.Exec, v1.IPv4Protocol, backend),
		iptables.New(d.Exec, v1.IPv6Protocol, backend),
	}
}

// All removes the leftovers of every mode: iptables and ipvs, then
// nftables (kube-proxy --cleanup). The error joins every part's failures.
func All(ctx context.Context, deps Deps) error {
	deps = deps.withDefaults()
	return errors.Join(
		iptablesAndIPVS(ctx, deps),
		cleanupNFTables(ctx, deps.NewNFTables),
	)
}

// ForMode removes the leftovers of the modes other than mode, as upstream
// does at startup: an iptables-based mode (iptables, ipvs) removes the
// nftables table; any other mode removes the iptables and ipvs leftovers.
func ForMode(ctx context.Context, mode config.ProxyMode, deps Deps) error {
	deps = deps.withDefaults()
	if isIPTablesBased(mode) {
		return cleanupNFTables(ctx, deps.NewNFTables)
	}
	return iptablesAndIPVS(ctx, deps)
}

// NFTables removes only the nftables proxier's tables.
func NFTables(ctx context.Context, deps Deps) error {
	deps = deps.withDefaults()
	return cleanupNFTables(ctx, deps.NewNFTables)
}

// IPTablesAndIPVS removes only the iptables and ipvs proxiers' leftovers.
func IPTablesAndIPVS(ctx context.Context, deps Deps) error {
	return iptablesAndIPVS(ctx, deps.withDefaults())
}

func isIPTablesBased(mode config.ProxyMode) bool {
	return mode == config.ProxyModeIPTables || mode == config.ProxyModeIPVS
}

// iptablesAndIPVS runs in upstream's order: rules first (they reference the
// ipsets), then IPVS and the dummy link, then the sets.
func iptablesAndIPVS(ctx context.Context, deps Deps) error {
	return errors.Join(
		cleanupIPTables(ctx, deps.iptablesFamilies(ctx)),
		cleanupIPVSKernel(ctx, deps.IPVS, deps.Links),
		cleanupIPSets(ctx, deps.IPSets),
	)
}
