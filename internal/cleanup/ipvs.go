package cleanup

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"
	"k8s.io/klog/v2"
	utilexec "k8s.io/utils/exec"
)

// Links is the boundary to network links; *netlink.Handle implements it
// (netlink.NewHandleAt targets another network namespace).
type Links interface {
	LinkByName(name string) (netlink.Link, error)
	LinkDel(link netlink.Link) error
}

// IPVS is the boundary to the kernel's IPVS table.
type IPVS interface {
	// Flush removes every IPVS virtual server. It returns an error wrapping
	// ErrIPVSUnavailable when the kernel has no IPVS.
	Flush(ctx context.Context) error
}

// ErrIPVSUnavailable reports a kernel without IPVS (ip_vs not loaded or not
// built), where there is nothing to flush.
var ErrIPVSUnavailable = errors.New("IPVS is not available in this kernel")

// IPSets is the boundary to the ipset tool.
type IPSets interface {
	// Available reports whether ipset can be used at all (upstream: "ipset
	// --version" succeeds).
	Available(ctx context.Context) bool
	// Destroy destroys one set; a set that does not exist is not an error.
	Destroy(ctx context.Context, name string) error
}

// ExecIPSets implements IPSets by running the ipset binary through Exec.
type ExecIPSets struct {
	Exec utilexec.Interface
}

var _ IPSets = ExecIPSets{}

// Available implements IPSets.
func (s ExecIPSets) Available(ctx context.Context) bool {
	if _, err := s.Exec.LookPath("ipset"); err != nil {
		return false
	}
	_, err := s.Exec.CommandContext(ctx, "ipset", "--version").CombinedOutput()
	return err == nil
}

// Destroy implements IPSets.
func (s ExecIPSets) Destroy(ctx context.Context, name string) error {
	out, err := s.Exec.CommandContext(ctx, "ipset", "destroy", name).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "does not exist") {
		return fmt.Errorf("ipset destroy %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// cleanupIPVSKernel removes the IPVS virtual servers and the kube-ipvs0 dummy
// link. It runs before the iptables cleanup, as upstream's does.
func cleanupIPVSKernel(ctx context.Context, ipvs IPVS, links Links) error {
	logger := klog.FromContext(ctx)
	var errs []error
	if ipvs != nil {
		if err := ipvs.Flush(ctx); err != nil {
			if errors.Is(err, ErrIPVSUnavailable) {
				logger.V(2).Info("IPVS not available; no virtual servers to remove", "err", err)
			} else {
				errs = append(errs, fmt.Errorf("ipvs: flushing virtual servers: %w", err))
			}
		}
	}
	if links != nil {
		if err := deleteDummyLink(links, ipvsDummyLink); err != nil {
			errs = append(errs, fmt.Errorf("ipvs: %w", err))
		}
	}
	return errors.Join(errs...)
}

// deleteDummyLink deletes the named link if it exists and is a dummy; a link
// of another type with our name is not ours and is reported, as upstream does.
func deleteDummyLink(links Links, name string) error {
	link, err := links.LinkByName(name)
	if err != nil {
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return nil
		}
		return fmt.Errorf("looking up link %s: %w", name, err)
	}
	if link.Type() != "dummy" {
		return fmt.Errorf("link %s is of type %q, not dummy; leaving it", name, link.Type())
	}
	if err := links.LinkDel(link); err != nil {
		return fmt.Errorf("deleting link %s: %w", name, err)
	}
	return nil
}

// cleanupIPSets destroys the ipvs proxier's sets. It must run after the
// iptables cleanup: a set still referenced by a rule cannot be destroyed.
func cleanupIPSets(ctx context.Context, sets IPSets) error {
	if sets == nil || !sets.Available(ctx) {
		klog.FromContext(ctx).V(2).Info("ipset not usable; no ipvs sets to remove")
		return nil
	}
	var errs []error
	for _, name := range ownedIPSets() {
		if err := sets.Destroy(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("ipvs: %w", err))
		}
	}
	return errors.Join(errs...)
}
