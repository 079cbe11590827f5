package cleanup

import (
	"context"
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Generic netlink constants of the kernel's IPVS interface
// (include/uapi/linux/ip_vs.h).
const (
	ipvsGenlName    = "IPVS"
	ipvsGenlVersion = 1
	ipvsCmdFlush    = 17 // IPVS_CMD_FLUSH
)

// NetlinkIPVS implements IPVS over generic netlink in one network namespace.
type NetlinkIPVS struct {
	// NetNS is the namespace to act in; netns.None() means the caller's.
	NetNS netns.NsHandle
}

var _ IPVS = NetlinkIPVS{}

// NewNetlinkIPVS returns an IPVS acting in the caller's network namespace.
func NewNetlinkIPVS() NetlinkIPVS { return NetlinkIPVS{NetNS: netns.None()} }

// Flush implements IPVS. It never loads the ip_vs module: when the IPVS
// generic netlink family is not registered, there are no virtual servers.
func (v NetlinkIPVS) Flush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h, err := netlink.NewHandleAt(v.NetNS, unix.NETLINK_GENERIC)
	if err != nil {
		return fmt.Errorf("opening generic netlink: %w", err)
	}
	defer h.Close()
	family, err := h.GenlFamilyGet(ipvsGenlName)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%w: generic netlink family %q not registered", ErrIPVSUnavailable, ipvsGenlName)
		}
		return fmt.Errorf("resolving generic netlink family %q: %w", ipvsGenlName, err)
	}

	sock, err := nl.GetNetlinkSocketAt(v.NetNS, netns.None(), unix.NETLINK_GENERIC)
	if err != nil {
		return fmt.Errorf("opening generic netlink socket: %w", err)
	}
	defer sock.Close()
	req := nl.NewNetlinkRequest(int(family.ID), unix.NLM_F_ACK)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_GENERIC: {Socket: sock}}
	req.AddData(&nl.Genlmsg{Command: ipvsCmdFlush, Version: ipvsGenlVersion})
	if _, err := req.Execute(unix.NETLINK_GENERIC, 0); err != nil {
		return fmt.Errorf("IPVS flush: %w", err)
	}
	return nil
}
