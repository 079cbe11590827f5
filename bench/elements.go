package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/kproxy/kproxy/test/lab"
)

// ServiceIPsCount counts the elements of map service-ips in table ip kube-proxy, from
// inside ns, with one netlink dump of the map's elements whose replies it counts
// without decoding the elements (countSetElements).
//
// Why not `nft list map` or google/nftables' GetSetElements: the first takes most of
// a second at 10,000 elements on a loaded machine; the second decodes every element
// into its own structures, 220-270 ms at 30,000, the lag of the initial-sync figure
// behind the moment the proxy's transaction ended (the probes see it within 20 ms).
func ServiceIPsCount(ctx context.Context, ns *lab.NS) (int, error) {
	var n int
	err := ns.Do(func() error {
		var err error
		n, err = countSetElements(ctx, unix.NFPROTO_IPV4, "kube-proxy", "service-ips")
		return err
	})
	return n, err
}

// countSetElements dumps the elements of set in table of family (an NFPROTO_*
// value) and counts them: the NFTA_LIST_ELEM attributes of each reply's
// NFTA_SET_ELEM_LIST_ELEMENTS. It must run in the namespace to read.
//
// It reads with a 64 KiB buffer: the kernel sizes each part of a dump by the reader's
// last buffer (up to 32 KiB), and restarts its walk of a hashed set from the first
// element for every part, so small parts cost time quadratic in the elements.
func countSetElements(ctx context.Context, family uint8, table, set string) (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return 0, fmt.Errorf("netlink socket: %w", err)
	}
	defer func() { _ = unix.Close(fd) }()
	if deadline, ok := ctx.Deadline(); ok {
		tv := unix.NsecToTimeval(max(time.Until(deadline), time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return 0, fmt.Errorf("netlink receive timeout: %w", err)
		}
	}
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.NFTA_SET_ELEM_LIST_TABLE, table)
	ae.String(unix.NFTA_SET_ELEM_LIST_SET, set)
	attrs, err := ae.Encode()
	if err != nil {
		return 0, err
	}
	const seq = 1
	req := netlink.Message{
		Header: netlink.Header{
			Type:     netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETSETELEM),
			Flags:    netlink.Request | netlink.Dump,
			Sequence: seq,
		},
		// nfgenmsg: family, version (NFNETLINK_V0), resource id (big endian).
		Data: append([]byte{family, unix.NFNETLINK_V0, 0, 0}, attrs...),
	}
	req.Header.Length = uint32(unix.NLMSG_HDRLEN + len(req.Data))
	b, err := req.MarshalBinary()
	if err != nil {
		return 0, err
	}
	if err := unix.Sendto(fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("netlink send: %w", err)
	}
	buf := make([]byte, 64<<10)
	n := 0
	for {
		got, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return 0, fmt.Errorf("dump elements of %s %s: %w", table, set, err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:got])
		if err != nil {
			return 0, fmt.Errorf("dump elements of %s %s: %w", table, set, err)
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return n, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if errno := -int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
						return 0, fmt.Errorf("dump elements of %s %s: %w", table, set, unix.Errno(errno))
					}
				}
				return n, nil
			}
			if len(m.Data) < 4 {
				continue
			}
			k, err := countListElems(m.Data[4:])
			if err != nil {
				return 0, fmt.Errorf("dump elements of %s %s: %w", table, set, err)
			}
			n += k
		}
	}
}

// countListElems counts the NFTA_LIST_ELEM attributes nested in the
// NFTA_SET_ELEM_LIST_ELEMENTS attribute of a reply's attributes.
func countListElems(attrs []byte) (int, error) {
	ad, err := netlink.NewAttributeDecoder(attrs)
	if err != nil {
		return 0, err
	}
	n := 0
	for ad.Next() {
		if ad.Type() != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
			continue
		}
		ad.Nested(func(nd *netlink.AttributeDecoder) error {
			for nd.Next() {
				if nd.Type() == unix.NFTA_LIST_ELEM {
					n++
				}
			}
			return nil
		})
	}
	return n, ad.Err()
}
