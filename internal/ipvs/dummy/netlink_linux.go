package dummy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kproxy/kproxy/internal/nlhandle"
)

// Netlink implements Interface over rtnetlink in one network namespace. The
// netlink handle is opened on first use; Netlink is safe for concurrent use.
type Netlink struct {
	nsPath string

	mu     sync.Mutex
	handle *netlink.Handle
}

var _ Interface = (*Netlink)(nil)

// New returns an Interface for the network namespace at nsPath (such as
// /run/netns/NAME), or the caller's when nsPath is "". It does no I/O.
func New(nsPath string) *Netlink { return &Netlink{nsPath: nsPath} }

// Close closes the netlink handle, if one was opened.
func (n *Netlink) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.handle != nil {
		n.handle.Close()
		n.handle = nil
	}
	return nil
}

func (n *Netlink) do(f func(h *netlink.Handle) error) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.handle == nil {
		h, err := nlhandle.Open(n.nsPath, unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		n.handle = h
	}
	return f(n.handle)
}

// link looks kube-ipvs0 up, wrapping ErrLinkNotFound when it is missing.
func link(h *netlink.Handle) (netlink.Link, error) {
	l, err := h.LinkByName(LinkName)
	if err != nil {
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return nil, fmt.Errorf("%w: %w", ErrLinkNotFound, err)
		}
		return nil, fmt.Errorf("looking up link %s: %w", LinkName, err)
	}
	return l, nil
}

// EnsureLink implements Interface.
func (n *Netlink) EnsureLink() error {
	return n.do(func(h *netlink.Handle) error {
		if _, err := link(h); err == nil || !errors.Is(err, ErrLinkNotFound) {
			return err
		}
		err := h.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: LinkName}})
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("creating dummy link %s: %w", LinkName, err)
		}
		return nil
	})
}

// DeleteLink implements Interface.
func (n *Netlink) DeleteLink() error {
	return n.do(func(h *netlink.Handle) error {
		l, err := link(h)
		if errors.Is(err, ErrLinkNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		// Upstream's DeleteDummyDevice: a link of another type is not ours.
		if l.Type() != "dummy" {
			return fmt.Errorf("link %s is of type %q, not dummy; leaving it", LinkName, l.Type())
		}
		if err := h.LinkDel(l); err != nil {
			return fmt.Errorf("deleting link %s: %w", LinkName, err)
		}
		return nil
	})
}

// Addresses implements Interface.
func (n *Netlink) Addresses() ([]netip.Addr, error) {
	var out []netip.Addr
	err := n.do(func(h *netlink.Handle) error {
		l, err := link(h)
		if err != nil {
			return err
		}
		addrs, err := addrList(h, l)
		if err != nil {
			return fmt.Errorf("listing the addresses of %s: %w", LinkName, err)
		}
		out = toAddrs(addrs, -1)
		return nil
	})
	return out, err
}

// AddAddress implements Interface.
func (n *Netlink) AddAddress(a netip.Addr) error {
	return n.addrCmd(a, "binding", (*netlink.Handle).AddrAdd, unix.EEXIST)
}

// DeleteAddress implements Interface. The kernel answers EADDRNOTAVAIL for
// an address that is not bound (upstream also tolerates ENXIO).
func (n *Netlink) DeleteAddress(a netip.Addr) error {
	return n.addrCmd(a, "unbinding", (*netlink.Handle).AddrDel, unix.EADDRNOTAVAIL, unix.ENXIO)
}

func (n *Netlink) addrCmd(a netip.Addr, verb string, cmd func(*netlink.Handle, netlink.Link, *netlink.Addr) error, harmless ...unix.Errno) error {
	addr, err := toNetlinkAddr(a)
	if err != nil {
		return err
	}
	return n.do(func(h *netlink.Handle) error {
		l, err := link(h)
		if err != nil {
			return err
		}
		err = cmd(h, l, addr)
		if err != nil && !slices.ContainsFunc(harmless, func(e unix.Errno) bool { return errors.Is(err, e) }) {
			return fmt.Errorf("%s %v on %s: %w", verb, a, LinkName, err)
		}
		return nil
	})
}

// NodeAddresses implements Interface.
func (n *Netlink) NodeAddresses() ([]netip.Addr, error) {
	var out []netip.Addr
	err := n.do(func(h *netlink.Handle) error {
		except := -1
		if l, err := link(h); err == nil {
			except = l.Attrs().Index
		} else if !errors.Is(err, ErrLinkNotFound) {
			return err
		}
		addrs, err := addrList(h, nil)
		if err != nil {
			return fmt.Errorf("listing the node's addresses: %w", err)
		}
		out = toAddrs(addrs, except)
		return nil
	})
	return out, err
}

// dumpAttempts bounds the retries of an address dump that the kernel
// marked interrupted.
const dumpAttempts = 5

// addrList dumps the addresses of l (every link's when nil), again when the
// kernel reports the dump interrupted (NLM_F_DUMP_INTR: the list changed
// meanwhile, as when an IPv6 address just bound leaves its tentative state),
// since netlink then hands back a list that may be incomplete.
func addrList(h *netlink.Handle, l netlink.Link) ([]netlink.Addr, error) {
	var err error
	for range dumpAttempts {
		var addrs []netlink.Addr
		addrs, err = h.AddrList(l, netlink.FAMILY_ALL)
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return addrs, err
		}
	}
	return nil, err
}

func toNetlinkAddr(a netip.Addr) (*netlink.Addr, error) {
	if !a.IsValid() || a.Is4In6() {
		return nil, fmt.Errorf("address %v is neither IPv4 nor IPv6", a)
	}
	a = a.WithZone("")
	ip := net.IP(a.AsSlice())
	return &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(a.BitLen(), a.BitLen())}}, nil
}

// toAddrs converts netlink's addresses, leaving out those of the link with
// index except, sorted and without duplicates.
func toAddrs(addrs []netlink.Addr, except int) []netip.Addr {
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if a.IPNet == nil || (except >= 0 && a.LinkIndex == except) {
			continue
		}
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			out = append(out, ip.Unmap())
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}
