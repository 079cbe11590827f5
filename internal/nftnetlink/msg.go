package nftnetlink

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// builder appends netlink messages and attributes to buffers handed to one
// sendmsg, with no per-message allocation. With chunkSize set, the batch is kept
// in chunks of about that size, each ending at a message boundary, rather than in
// one slice: a slice growing by doubling would briefly hold a large batch twice
// (the old and the new array), and the kernel gathers the chunks into one skb
// anyway.
type builder struct {
	buf []byte // the chunk being written
	// sealed are the earlier, complete chunks.
	sealed [][]byte
	// free are chunks a reader of the batch is done with (InventoryOf), reused
	// before new ones are made.
	free [][]byte
	// chunkSize is the capacity of a new chunk; a chunk is sealed before a
	// message starts in it with less than chunkHeadroom bytes left.
	chunkSize int
	seq       uint32
	// refs[i] is the command whose messages have sequence numbers from seqs[i] on,
	// so kernel errors (which carry the failing message's sequence) can be reported
	// with the command's text.
	seqs []uint32
	refs []commandRef
}

// commandRef locates a command in the transactions of a batch: line Line of the
// text of transaction Part. The text itself is not kept, so that the parts of a
// large batch can be collected while it is built.
type commandRef struct{ Part, Line int32 }

const nlaHdrLen = 4

// chunkHeadroom is the room a chunk must have left for a message to start in it:
// more than any message the translator writes (element lists are cut at
// maxElemsBytes), so that messages do not outgrow their chunk, and little enough
// that the chunks of a large batch are nearly full (the unused tail of each is
// memory held with the batch: with a quarter of a chunk of headroom, 4 MB of a
// 22 MB batch at 10,000 Services). A larger message is still written whole: its
// chunk grows by copying.
const chunkHeadroom = 64 << 10

func (b *builder) beginMsg(msgType uint16, flags uint16, family byte, resID uint16) int {
	if b.chunkSize > 0 && cap(b.buf)-len(b.buf) < chunkHeadroom {
		// No message is open between messages, so every offset handed out so far
		// belongs to a finished message and the chunk can be sealed.
		b.sealed = append(b.sealed, b.buf)
		if n := len(b.free); n > 0 {
			b.buf, b.free = b.free[n-1][:0], b.free[:n-1]
		} else {
			b.buf = make([]byte, 0, b.chunkSize)
		}
	}
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

// buffers returns the batch as the list of its chunks.
func (b *builder) buffers() [][]byte { return append(b.sealed[:len(b.sealed):len(b.sealed)], b.buf) }

// release returns the batch as the list of its chunks, which the builder no
// longer holds: it is empty afterwards (a reader may drop each chunk once read).
func (b *builder) release() [][]byte {
	chunks := b.buffers()
	b.sealed, b.buf, b.free = nil, nil, nil
	return chunks
}

// size is the length of the batch in bytes.
func (b *builder) size() int {
	n := len(b.buf)
	for _, c := range b.sealed {
		n += len(c)
	}
	return n
}

// markCommand records that the following messages belong to the command at ref.
func (b *builder) markCommand(ref commandRef) {
	b.seqs = append(b.seqs, b.seq+1)
	b.refs = append(b.refs, ref)
}

// commandFor returns the command that produced the message with sequence seq.
func (b *builder) commandFor(seq uint32) (commandRef, bool) {
	var ref commandRef
	found := false
	for i, s := range b.seqs {
		if s > seq {
			break
		}
		ref, found = b.refs[i], true
	}
	return ref, found
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
