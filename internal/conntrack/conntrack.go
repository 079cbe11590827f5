package conntrack

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// Interface lists and deletes entries of the conntrack table of one IP family.
type Interface interface {
	// ListEntries returns the entries of the family. A dump interrupted by the
	// kernel (EINTR after retries) returns the partial result together with an
	// error wrapping unix.EINTR.
	ListEntries(family v1.IPFamily) ([]*netlink.ConntrackFlow, error)
	// DeleteEntries deletes exactly the given flows (matched on their
	// original and reply tuples) and returns how many were deleted.
	DeleteEntries(family v1.IPFamily, flows []*netlink.ConntrackFlow) (int, error)
	// ClearEntries deletes every entry matching any of the filters and returns how
	// many were deleted.
	ClearEntries(family v1.IPFamily, filters ...netlink.CustomConntrackFilter) (int, error)
}

// netlinkHandler is the part of *netlink.Handle used here, so a fake table can sit
// behind the real implementation.
type netlinkHandler interface {
	ConntrackTableList(netlink.ConntrackTableType, netlink.InetFamily) ([]*netlink.ConntrackFlow, error)
	ConntrackDeleteFilters(netlink.ConntrackTableType, netlink.InetFamily, ...netlink.CustomConntrackFilter) (uint, error)
}

// maxAttemptsEINTR bounds the retries of a netlink dump the kernel interrupted
// (it does so when the table changes during the dump), as kube-proxy does.
const maxAttemptsEINTR = 5

type conntracker struct {
	handler netlinkHandler
}

var _ Interface = (*conntracker)(nil)

// New returns the netlink implementation, working in the network namespace of the
// calling thread at the time of each call.
func New() Interface {
	return &conntracker{handler: &netlink.Handle{}}
}

func inetFamily(family v1.IPFamily) (netlink.InetFamily, error) {
	switch family {
	case v1.IPv4Protocol:
		return unix.AF_INET, nil
	case v1.IPv6Protocol:
		return unix.AF_INET6, nil
	}
	return 0, fmt.Errorf("unknown IP family %q", family)
}

func retryOnEINTR(fn func() error) error {
	var err error
	for range maxAttemptsEINTR {
		if err = fn(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
	return err
}

// ListEntries implements Interface.
func (ct *conntracker) ListEntries(family v1.IPFamily) ([]*netlink.ConntrackFlow, error) {
	fam, err := inetFamily(family)
	if err != nil {
		return nil, err
	}
	var entries []*netlink.ConntrackFlow
	err = retryOnEINTR(func() error {
		var err error
		entries, err = ct.handler.ConntrackTableList(netlink.ConntrackTable, fam)
		return err
	})
	if err != nil {
		return entries, fmt.Errorf("listing %s conntrack entries: %w", family, err)
	}
	return entries, nil
}

// DeleteEntries implements Interface.
func (ct *conntracker) DeleteEntries(family v1.IPFamily, flows []*netlink.ConntrackFlow) (int, error) {
	if len(flows) == 0 {
		return 0, nil
	}
	return ct.ClearEntries(family, newFlowFilter(flows))
}

// ClearEntries implements Interface.
func (ct *conntracker) ClearEntries(family v1.IPFamily, filters ...netlink.CustomConntrackFilter) (int, error) {
	if len(filters) == 0 {
		return 0, nil
	}
	fam, err := inetFamily(family)
	if err != nil {
		return 0, err
	}
	var total uint
	err = retryOnEINTR(func() error {
		// A retry after EINTR re-dumps the table; entries deleted by the
		// interrupted attempt are gone, so the counts add up.
		n, err := ct.handler.ConntrackDeleteFilters(netlink.ConntrackTable, fam, filters...)
		total += n
		return err
	})
	if err != nil {
		return int(total), fmt.Errorf("deleting %s conntrack entries: %w", family, err)
	}
	return int(total), nil
}
