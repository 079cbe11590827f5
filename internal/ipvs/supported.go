package ipvs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/klog/v2"
)

// MinIPSetVersion is the oldest ipset tool the ipvs mode accepts (upstream's
// MinIPSetCheckVersion).
const MinIPSetVersion = "6.0"

// DefaultScheduler is the scheduler of a blank ipvs.scheduler (upstream's).
const DefaultScheduler = "rr"

// IPSetVersioner is the part of internal/ipset's Interface that CanUse needs.
type IPSetVersioner interface {
	// Version is the ipset tool's version, as "v7.19".
	Version(ctx context.Context) (string, error)
}

// probeVirtualServer is upstream's dummy virtual server: an address of
// TEST-NET-2 (RFC 5737), reserved for documentation, so that no Service
// uses it.
func probeVirtualServer(scheduler string) VirtualServer {
	return VirtualServer{
		Address:   netip.MustParseAddr("198.51.100.0"),
		Protocol:  v1.ProtocolTCP,
		Port:      20000,
		Scheduler: scheduler,
	}
}

// CanUse checks, as upstream's CanUseIPVSProxier, that the ipvs mode can run:
// the ipset tool is at least MinIPSetVersion, and the kernel has IPVS with
// the scheduler (DefaultScheduler when blank). A virtual server that already
// uses the scheduler proves it (a restart); otherwise a dummy virtual server
// (198.51.100.0:20000/TCP) is added with it, read back and deleted, which
// also makes the kernel load the scheduler's module. The errors are worded
// as upstream's.
func CanUse(ctx context.Context, ipvs Interface, ipset IPSetVersioner, scheduler string) error {
	logger := klog.FromContext(ctx)
	if ipvs == nil {
		return errors.New("ipvs not supported by the kernel")
	}

	version, err := ipset.Version(ctx)
	if err != nil {
		return fmt.Errorf("error getting ipset version, error: %w", err)
	}
	if !atLeast(version, MinIPSetVersion) {
		return fmt.Errorf("ipset version: %s is less than min required version: %s", version, MinIPSetVersion)
	}

	if scheduler == "" {
		scheduler = DefaultScheduler
	}
	vss, err := ipvs.VirtualServers()
	if err != nil {
		return unsupported(err)
	}
	for _, vs := range vss {
		if vs.Scheduler == scheduler {
			logger.V(5).Info("A virtual server uses the scheduler; skipping the dummy virtual server", "scheduler", scheduler)
			return nil
		}
	}

	probe := probeVirtualServer(scheduler)
	if err := ipvs.AddVirtualServer(probe); err != nil {
		return unsupported(err)
	}
	// Upstream reads the table back because moby/ipvs silently ignores
	// requests when the kernel had no IPVS at its first use in the process.
	vss, err = ipvs.VirtualServers()
	if err != nil {
		return unsupported(err)
	}
	found := false
	for _, vs := range vss {
		if vs.Key() == probe.Key() {
			found = true
		}
	}
	if !found {
		return errors.New("ipvs not supported")
	}
	if err := ipvs.DeleteVirtualServer(probe.Key()); err != nil {
		return fmt.Errorf("deleting the dummy virtual server %s: %w", probe.Key(), err)
	}
	return nil
}

// unsupported words a kernel without IPVS as upstream does ("ipvs not
// supported"), keeping the cause; other errors are returned as they are,
// as upstream returns them.
func unsupported(err error) error {
	if errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("ipvs not supported: %w", err)
	}
	return err
}

// atLeast reports whether version (as "v7.19") is minimum or later; an
// unparseable version is not (upstream's checkMinVersion).
func atLeast(version, minimum string) bool {
	v, err := utilversion.ParseGeneric(version)
	if err != nil {
		return false
	}
	return !v.LessThan(utilversion.MustParseGeneric(minimum))
}
