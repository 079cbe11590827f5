package nftnetlink

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"
)

// FuzzKernelReplies: a datagram from the kernel (what recv reads: a dump of the
// table's sets, chains, rules, elements and counters for drift detection, a set's
// type for element commands, an error or an ack) is read by every reader of
// kernel messages without a panic: parseReplies, errno, attrs, decodeSet, and the
// inventory's canonical hashes (ReadInventory's readers). The hashes do not depend
// on map order: reading a message twice gives the same inventory. The batch
// reader of InventoryOf reads the same bytes too. Seeds: the batches of the
// renderer's expected-output files (nfnetlink messages, as the kernel dumps them)
// and an error reply; the corpus is in testdata/fuzz. `make fuzz` runs it
// (hack/fuzz.sh).
func FuzzKernelReplies(f *testing.F) {
	for _, name := range []string{"base-ipv4", "clusterip-protocols", "loadbalancer-source-ranges", "session-affinity"} {
		file := filepath.Join("../render/nftables/testdata", name+".nft")
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		ex, err := New(knftables.IPv4Family, "kube-proxy", Options{})
		if err != nil {
			f.Fatal(err)
		}
		b, err := ex.build(slices.Values([]string{string(data)}), nil, true)
		if err != nil {
			f.Fatalf("%s: %v", file, err)
		}
		// A datagram of whole messages, as recv reads them (at most 2 KiB here: the fuzzer mutates small inputs faster).
		var datagram []byte
		for _, buf := range b.buffers() {
			for len(buf) >= unix.NLMSG_HDRLEN {
				n := int(binary.NativeEndian.Uint32(buf))
				if n < unix.NLMSG_HDRLEN || n > len(buf) || len(datagram)+n > 2048 {
					break
				}
				datagram = append(datagram, buf[:n]...)
				buf = buf[min((n+3)&^3, len(buf)):]
			}
		}
		f.Add(datagram)
	}
	// NLMSG_ERROR: EPERM for sequence 7.
	errMsg := make([]byte, unix.NLMSG_HDRLEN+4+unix.NLMSG_HDRLEN)
	binary.NativeEndian.PutUint32(errMsg, uint32(len(errMsg)))
	binary.NativeEndian.PutUint16(errMsg[4:], unix.NLMSG_ERROR)
	code := -int32(unix.EPERM)
	binary.NativeEndian.PutUint32(errMsg[unix.NLMSG_HDRLEN:], uint32(code))
	binary.NativeEndian.PutUint32(errMsg[unix.NLMSG_HDRLEN+4+8:], 7)
	f.Add(errMsg)
	f.Fuzz(func(t *testing.T, data []byte) {
		replies, _ := parseReplies(data)
		for _, r := range replies {
			if r.typ == unix.NLMSG_ERROR {
				_, _ = r.errno()
				continue
			}
			if len(r.data) <= 4 {
				continue
			}
			msg := r.data[4:]
			_ = attrs(msg)
			_, _ = decodeSet(msg)
			if a, b := readKernelMessage(msg), readKernelMessage(msg); !inventoryEqual(a, b) {
				t.Fatalf("one message, two inventories: %+v and %+v", a, b)
			}
		}
		r := &batchReader{inv: newInventory(), anon: map[uint32]uint64{}}
		r.read(data)
	})
}

// readKernelMessage reads msg as each kind of object ReadInventory dumps.
func readKernelMessage(msg []byte) *Inventory {
	inv := newInventory()
	name := str(msg, unix.NFTA_SET_NAME)
	if flags, _ := attrGet(msg, unix.NFTA_SET_FLAGS); be32(flags)&unix.NFT_SET_ANONYMOUS != 0 {
		inv.Chains["anon "+name] = &InventoryChain{Def: setDefHash(msg)}
	} else {
		inv.Sets[name] = newInventorySet(msg)
	}
	var scratch []uint64
	list, _ := attrGet(msg, unix.NFTA_SET_ELEM_LIST_ELEMENTS)
	s := &InventorySet{Elements: map[uint64]uint64{}}
	s.addElements(list)
	s.Def = elementsHash(0, list, &scratch)
	inv.Sets["elements"] = s
	c := &InventoryChain{Def: chainDefHash(msg)}
	exprs, _ := attrGet(msg, unix.NFTA_RULE_EXPRESSIONS)
	ud, _ := attrGet(msg, unix.NFTA_RULE_USERDATA)
	resolve := func(lookup []byte) (uint64, bool) {
		name, _ := attrGet(lookup, unix.NFTA_LOOKUP_SET)
		return uint64(len(name)), strings.HasPrefix(cstring(name), "__")
	}
	c.Rules = append(c.Rules, ruleHash(exprs, ud, resolve))
	inv.Chains[str(msg, unix.NFTA_CHAIN_NAME)] = c
	if typ, _ := attrGet(msg, unix.NFTA_OBJ_TYPE); be32(typ) == nftObjectCounter {
		inv.Counters[str(msg, unix.NFTA_OBJ_NAME)] = true
	}
	return inv
}

// inventoryEqual compares two inventories.
func inventoryEqual(a, b *Inventory) bool { return reflect.DeepEqual(a, b) }
