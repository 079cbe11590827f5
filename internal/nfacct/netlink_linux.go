package nfacct

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	mdnetlink "github.com/mdlayher/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// nfnetlink_acct's message types and attributes (linux/netfilter/nfnetlink_acct.h).
const (
	subsysAcct  = 7 // NFNL_SUBSYS_ACCT
	msgAcctNew  = 0 // NFNL_MSG_ACCT_NEW
	msgAcctGet  = 1 // NFNL_MSG_ACCT_GET
	attrName    = 1 // NFACCT_NAME
	attrPackets = 2 // NFACCT_PKTS
	attrBytes   = 3 // NFACCT_BYTES
)

// Netlink is the Interface of the kernel's nfacct subsystem, over nfnetlink. Each
// call uses its own socket; Netlink is safe for concurrent use.
type Netlink struct {
	// ns is the network namespace to work in; netns.None() means the caller's.
	ns netns.NsHandle
}

var _ Interface = (*Netlink)(nil)

// New returns a client for the caller's network namespace. It does no I/O.
func New() *Netlink { return &Netlink{ns: netns.None()} }

// NewAt returns a client for the network namespace ns (which the caller keeps
// open). It does no I/O.
func NewAt(ns netns.NsHandle) *Netlink { return &Netlink{ns: ns} }

// Ensure implements Interface: it creates the counter unless Get finds it, as
// upstream does (creating an existing counter would reset nothing, but fails).
func (n *Netlink) Ensure(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if _, err := n.Get(name); err == nil {
		return nil
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	_, err := n.execute(msgAcctNew, unix.NLM_F_CREATE|unix.NLM_F_EXCL|unix.NLM_F_ACK, name)
	if errors.Is(err, unix.EEXIST) {
		return nil // created meanwhile by someone else
	}
	if err != nil {
		return fmt.Errorf("creating nfacct counter %q: %w", name, err)
	}
	return nil
}

// Get implements Interface.
func (n *Netlink) Get(name string) (Counter, error) {
	if err := checkName(name); err != nil {
		return Counter{}, err
	}
	msgs, err := n.execute(msgAcctGet, unix.NLM_F_ACK, name)
	if errors.Is(err, unix.ENOENT) {
		return Counter{}, fmt.Errorf("%q: %w", name, ErrNotFound)
	}
	if err != nil {
		return Counter{}, fmt.Errorf("reading nfacct counter %q: %w", name, err)
	}
	for _, msg := range msgs {
		c, err := parseCounter(msg)
		if err != nil {
			return Counter{}, fmt.Errorf("reading nfacct counter %q: %w", name, err)
		}
		if c.Name == name {
			return c, nil
		}
	}
	return Counter{}, fmt.Errorf("%q: %w (no reply carried it)", name, ErrNotFound)
}

// execute sends one nfacct request naming a counter and returns the replies'
// payloads (after the netlink header).
func (n *Netlink) execute(msgType, flags int, name string) ([][]byte, error) {
	req := nl.NewNetlinkRequest(subsysAcct<<8|msgType, flags)
	req.AddData(&nl.Nfgenmsg{NfgenFamily: unix.AF_UNSPEC, Version: unix.NFNETLINK_V0})
	req.AddData(nl.NewRtAttr(attrName, nl.ZeroTerminated(name)))
	if n.ns.IsOpen() {
		sock, err := nl.GetNetlinkSocketAt(n.ns, netns.None(), unix.NETLINK_NETFILTER)
		if err != nil {
			return nil, err
		}
		defer sock.Close()
		req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_NETFILTER: {Socket: sock}}
	}
	msgs, err := req.Execute(unix.NETLINK_NETFILTER, 0)
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return nil, errno
	}
	return msgs, err
}

// parseCounter decodes an NFNL_MSG_ACCT_NEW reply: an nfgenmsg header, then the
// attributes (counts are big-endian 64-bit). mdlayher/netlink's decoder reads them
// with bounds checks: vishvananda's nl.ParseRouteAttr panics on a last attribute
// whose padding the message does not hold.
func parseCounter(msg []byte) (Counter, error) {
	if len(msg) < nl.SizeofNfgenmsg {
		return Counter{}, fmt.Errorf("short nfacct message (%d bytes)", len(msg))
	}
	ad, err := mdnetlink.NewAttributeDecoder(msg[nl.SizeofNfgenmsg:])
	if err != nil {
		return Counter{}, fmt.Errorf("parsing nfacct attributes: %w", err)
	}
	var c Counter
	for ad.Next() {
		value := ad.Bytes()
		switch ad.Type() {
		case attrName:
			c.Name = string(trimZero(value))
		case attrPackets:
			if len(value) == 8 {
				c.Packets = binary.BigEndian.Uint64(value)
			}
		case attrBytes:
			if len(value) == 8 {
				c.Bytes = binary.BigEndian.Uint64(value)
			}
		}
	}
	if err := ad.Err(); err != nil {
		return Counter{}, fmt.Errorf("parsing nfacct attributes: %w", err)
	}
	return c, nil
}

func trimZero(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}
