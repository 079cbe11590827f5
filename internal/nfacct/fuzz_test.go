package nfacct

import (
	"encoding/binary"
	"testing"

	"github.com/vishvananda/netlink/nl"
)

// FuzzParseCounter: an nfacct reply from the kernel (after the netlink header) is
// read or refused, never panics the reader; a reply this package would send for a
// counter reads back as that counter. The corpus is in testdata/fuzz. `make fuzz`
// runs it (hack/fuzz.sh).
func FuzzParseCounter(f *testing.F) {
	f.Add(counterMsg("kproxy-rejected", 3, 180), "kproxy-rejected", uint64(3), uint64(180))
	f.Add(counterMsg("", 0, 0), "", uint64(0), uint64(0))
	f.Add([]byte{0, 0, 0, 0, 5, 0, 1}, "x", uint64(1), uint64(2))
	f.Fuzz(func(t *testing.T, msg []byte, name string, packets, bytes uint64) {
		_, _ = parseCounter(msg)
		if len(name) > 30 || !isPlain(name) {
			return
		}
		c, err := parseCounter(counterMsg(name, packets, bytes))
		if err != nil || c != (Counter{Name: name, Packets: packets, Bytes: bytes}) {
			t.Fatalf("counter %q %d %d reads back as %+v, %v", name, packets, bytes, c, err)
		}
	})
}

// isPlain: no NUL (a name is NUL-terminated).
func isPlain(s string) bool {
	for i := range len(s) {
		if s[i] == 0 {
			return false
		}
	}
	return true
}

// counterMsg is an NFNL_MSG_ACCT_NEW reply's payload: nfgenmsg, then the name,
// packets and bytes attributes.
func counterMsg(name string, packets, bytes uint64) []byte {
	msg := (&nl.Nfgenmsg{NfgenFamily: 0, Version: 0}).Serialize()
	msg = append(msg, nl.NewRtAttr(attrName, nl.ZeroTerminated(name)).Serialize()...)
	msg = append(msg, nl.NewRtAttr(attrPackets, binary.BigEndian.AppendUint64(nil, packets)).Serialize()...)
	return append(msg, nl.NewRtAttr(attrBytes, binary.BigEndian.AppendUint64(nil, bytes)).Serialize()...)
}
