package nftnetlink

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// builder appends netlink messages and attributes to one buffer: the whole batch is
// a single byte slice handed to one sendmsg, with no per-message allocation.
type builder struct {
	buf []byte
	seq uint32
	// cmds[i] is the command whose messages have sequence numbers from seqs[i] on,
	// so kernel errors (which carry the failing message's sequence) can be reported
	// with the command's text.
	seqs []uint32
	cmds []string
}

const nlaHdrLen = 4

func (b *builder) beginMsg(msgType uint16, flags uint16, family byte, resID uint16) int {
	start := len(b.buf)
	b.seq++
	var h [unix.NLMSG_HDRLEN + 4]byte
	binary.NativeEndian.PutUint16(h[4:], msgType)
	binary.NativeEndian.PutUint16(h[6:], flags)
	binary.NativeEndian.PutUint32(h[8:], b.seq)
	h[16] = family
	h[17] = unix.NFNETLINK_V0
	binary.BigEndian.PutUint16(h[18:], resID)
	b.buf = append(b.buf, h[:]...)
	return start
}

func (b *builder) endMsg(start int) {
	binary.NativeEndian.PutUint32(b.buf[start:], uint32(len(b.buf)-start))
}

// nftMsg starts an nf_tables message of type t (NFT_MSG_*).
func (b *builder) nftMsg(t int, flags uint16, family byte) int {
	return b.beginMsg(uint16(unix.NFNL_SUBSYS_NFTABLES<<8|t), unix.NLM_F_REQUEST|flags, family, 0)
}

func (b *builder) attr(t uint16, data []byte) {
	l := nlaHdrLen + len(data)
	b.buf = binary.NativeEndian.AppendUint16(b.buf, uint16(l))
	b.buf = binary.NativeEndian.AppendUint16(b.buf, t)
	b.buf = append(b.buf, data...)
	for len(b.buf)%4 != 0 {
		b.buf = append(b.buf, 0)
	}
}

func (b *builder) attrString(t uint16, s string) {
	l := nlaHdrLen + len(s) + 1
	b.buf = binary.NativeEndian.AppendUint16(b.buf, uint16(l))
	b.buf = binary.NativeEndian.AppendUint16(b.buf, t)
	b.buf = append(b.buf, s...)
	b.buf = append(b.buf, 0)
	for len(b.buf)%4 != 0 {
		b.buf = append(b.buf, 0)
	}
}

func (b *builder) attrU32(t uint16, v uint32) {
	b.attr(t, binary.BigEndian.AppendUint32(nil, v))
}

func (b *builder) attrU64(t uint16, v uint64) {
	b.attr(t, binary.BigEndian.AppendUint64(nil, v))
}

func (b *builder) beginNest(t uint16) int {
	start := len(b.buf)
	b.buf = append(b.buf, 0, 0, 0, 0)
	binary.NativeEndian.PutUint16(b.buf[start+2:], t|unix.NLA_F_NESTED)
	return start
}

func (b *builder) endNest(start int) {
	binary.NativeEndian.PutUint16(b.buf[start:], uint16(len(b.buf)-start))
}

// markCommand records that the following messages belong to cmd.
func (b *builder) markCommand(cmd string) {
	b.seqs = append(b.seqs, b.seq+1)
	b.cmds = append(b.cmds, cmd)
}

// commandFor returns the command that produced the message with sequence seq.
func (b *builder) commandFor(seq uint32) string {
	cmd := ""
	for i, s := range b.seqs {
		if s > seq {
			break
		}
		cmd = b.cmds[i]
	}
	return cmd
}

// udata builds nftnl userdata: a list of (type u8, length u8, value) records.
type udata []byte

func (u udata) u32(t byte, v uint32) udata {
	u = append(u, t, 4)
	return binary.NativeEndian.AppendUint32(u, v)
}

func (u udata) str(t byte, s string) udata {
	u = append(u, t, byte(len(s)+1))
	u = append(u, s...)
	return append(u, 0)
}

// nested appends a record holding other records.
func (u udata) nested(t byte, inner udata) udata {
	u = append(u, t, byte(len(inner)))
	return append(u, inner...)
}
