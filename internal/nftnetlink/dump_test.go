package nftnetlink

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kproxy/kproxy/internal/testing/golden"
)

// checkGolden is the shared expected-output check (internal/testing/golden).
var checkGolden = golden.Check

var nftMsgNames = map[uint16]string{
	unix.NFT_MSG_NEWTABLE: "NEWTABLE", unix.NFT_MSG_DELTABLE: "DELTABLE",
	unix.NFT_MSG_NEWCHAIN: "NEWCHAIN", unix.NFT_MSG_DELCHAIN: "DELCHAIN",
	unix.NFT_MSG_NEWRULE: "NEWRULE", unix.NFT_MSG_DELRULE: "DELRULE",
	unix.NFT_MSG_NEWSET: "NEWSET", unix.NFT_MSG_DELSET: "DELSET",
	unix.NFT_MSG_NEWSETELEM: "NEWSETELEM", unix.NFT_MSG_DELSETELEM: "DELSETELEM",
	unix.NFT_MSG_NEWOBJ: "NEWOBJ", unix.NFT_MSG_DELOBJ: "DELOBJ",
}

// dumpBatch writes a batch readably, one message header per line and one line per
// top-level attribute (and per element of a list such as a rule's expressions),
// nested attributes inline in braces as type{…}, NUL-terminated printable strings
// quoted and other values in hex. Sequence numbers are left out.
func dumpBatch(bufs [][]byte) string {
	var b strings.Builder
	for _, buf := range bufs {
		for len(buf) >= unix.NLMSG_HDRLEN+4 {
			n := int(binary.NativeEndian.Uint32(buf))
			typ := binary.NativeEndian.Uint16(buf[4:])
			flags := binary.NativeEndian.Uint16(buf[6:])
			name := fmt.Sprintf("type %#x", typ)
			switch {
			case typ == unix.NFNL_MSG_BATCH_BEGIN:
				name = "BATCH_BEGIN"
			case typ == unix.NFNL_MSG_BATCH_END:
				name = "BATCH_END"
			case typ>>8 == unix.NFNL_SUBSYS_NFTABLES && nftMsgNames[typ&0xff] != "":
				name = nftMsgNames[typ&0xff]
			}
			fmt.Fprintf(&b, "%s flags=%#x family=%d\n", name, flags, buf[unix.NLMSG_HDRLEN])
			for _, a := range dumpAttrs(buf[unix.NLMSG_HDRLEN+4 : n]) {
				if a.nested && isList(a.data) {
					fmt.Fprintf(&b, "  %d [\n", a.typ)
					for _, e := range dumpAttrs(a.data) {
						b.WriteString("    " + inline(e) + "\n")
					}
					b.WriteString("  ]\n")
					continue
				}
				b.WriteString("  " + inline(a) + "\n")
			}
			buf = buf[(n+3)&^3:]
		}
	}
	return b.String()
}

type nlattr struct {
	typ    uint16
	nested bool
	data   []byte
}

func dumpAttrs(b []byte) []nlattr {
	var out []nlattr
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b))
		t := binary.NativeEndian.Uint16(b[2:])
		if l < 4 || l > len(b) {
			return append(out, nlattr{typ: 0xffff, data: b})
		}
		out = append(out, nlattr{typ: t &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER), nested: t&unix.NLA_F_NESTED != 0, data: b[4:l]})
		b = b[min((l+3)&^3, len(b)):]
	}
	return out
}

// isList reports whether every attribute of a nest is a nested NFTA_LIST_ELEM.
func isList(b []byte) bool {
	as := dumpAttrs(b)
	for _, a := range as {
		if a.typ != unix.NFTA_LIST_ELEM || !a.nested {
			return false
		}
	}
	return len(as) > 0
}

func inline(a nlattr) string {
	if a.nested {
		parts := make([]string, 0, 4)
		for _, c := range dumpAttrs(a.data) {
			parts = append(parts, inline(c))
		}
		return strconv.Itoa(int(a.typ)) + "{" + strings.Join(parts, " ") + "}"
	}
	return strconv.Itoa(int(a.typ)) + ":" + value(a.data)
}

func value(b []byte) string {
	if n := len(b); n > 1 && b[n-1] == 0 {
		printable := true
		for _, c := range b[:n-1] {
			if c < 0x20 || c > 0x7e {
				printable = false
				break
			}
		}
		if printable {
			return strconv.Quote(string(b[:n-1]))
		}
	}
	return hex.EncodeToString(b)
}
