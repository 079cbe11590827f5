package cleanup

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/vishvananda/netlink"
	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/ipvs"
)

// Links is the boundary to network links; *netlink.Handle implements it
// (netlink.NewHandleAt targets another network namespace).
type Links interface {
	LinkByName(name string) (netlink.Link, error)
	LinkDel(link netlink.Link) error
}

// IPVS is the part of the IPVS boundary (internal/ipvs) the cleanup uses;
// *ipvs.Netlink and *ipvs.Fake implement it.
type IPVS interface {
	// Flush removes every IPVS virtual server. Its error wraps
	// ErrIPVSUnavailable when the kernel has no IPVS.
	Flush() error
}

// ErrIPVSUnavailable reports a kernel without IPVS (ip_vs not loaded or not
// built), where there is nothing to flush. It is internal/ipvs's
// ErrUnavailable.
var ErrIPVSUnavailable = ipvs.ErrUnavailable

// IPSets is the part of the ipset boundary (internal/ipset) the cleanup
// uses; *ipset.Exec and *ipset.Fake implement it.
type IPSets interface {
	// Version succeeds when ipset can be used at all (upstream: "ipset
	// --version" succeeds).
	Version(ctx context.Context) (string, error)
	// ListSets lists the names of the sets that exist.
	ListSets(ctx context.Context) ([]string, error)
	// Destroy destroys one set; a set that does not exist is not an error.
	Destroy(ctx context.Context, name string) error
}

// cleanupIPVSKernel removes the IPVS virtual servers and the kube-ipvs0 dummy
// link. It runs before the iptables cleanup, as upstream's does.
func cleanupIPVSKernel(ctx context.Context, table IPVS, links Links) error {
	logger := klog.FromContext(ctx)
	var errs []error
	if table == nil {
		// The caller's namespace, with a socket that lives as long as
		// this cleanup.
		n := ipvs.New("")
		defer func() { _ = n.Close() }()
		table = n
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	} else {
		if err := table.Flush(); err != nil {
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
	if sets == nil {
		return nil
	}
	if _, err := sets.Version(ctx); err != nil {
		klog.FromContext(ctx).V(2).Info("ipset not usable; no ipvs sets to remove", "err", err)
		return nil
	}
	// Destroy only the sets that exist: one "ipset list -n" instead of an
	// ipset process per name (34) on the nodes that have none. When the list
	// fails, every name is tried, as upstream does.
	names := ownedIPSets()
	if present, err := sets.ListSets(ctx); err == nil {
		names = slices.DeleteFunc(names, func(name string) bool { return !slices.Contains(present, name) })
	} else {
		klog.FromContext(ctx).V(2).Info("Could not list ipsets; destroying every ipvs set name", "err", err)
	}
	var errs []error
	for _, name := range names {
		if err := sets.Destroy(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("ipvs: %w", err))
		}
	}
	return errors.Join(errs...)
}
