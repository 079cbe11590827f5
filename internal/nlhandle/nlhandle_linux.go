package nlhandle

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Open returns a netlink handle of protocol (unix.NETLINK_ROUTE,
// unix.NETLINK_GENERIC, ...) in the network namespace at nsPath, or in the
// caller's when nsPath is "". The caller closes it.
func Open(nsPath string, protocol int) (*netlink.Handle, error) {
	ns := netns.None()
	if nsPath != "" {
		var err error
		if ns, err = netns.GetFromPath(nsPath); err != nil {
			return nil, fmt.Errorf("opening network namespace %s: %w", nsPath, err)
		}
		defer ns.Close()
	}
	h, err := netlink.NewHandleAt(ns, protocol)
	if err != nil {
		return nil, fmt.Errorf("opening netlink protocol %d in %s: %w", protocol, Where(nsPath), err)
	}
	return h, nil
}

// Where names the namespace at nsPath for messages.
func Where(nsPath string) string {
	if nsPath == "" {
		return "the current network namespace"
	}
	return nsPath
}
