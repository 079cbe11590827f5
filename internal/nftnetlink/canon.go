package nftnetlink

import (
	"encoding/binary"
	"hash"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// Canonical forms: how the kernel's dumps and kproxy's own batches are reduced to
// the same bytes when they describe the same object, so that drift detection
// (inventory.go) can compare what the kernel holds with what was written.
//
// A dump is not the batch that created it. Measured on the renderer's
// expected-output cases (TestInventoryOfWrittenTableMatchesKernel keeps it so):
//   - nested attributes lose NLA_F_NESTED, and attributes come in the order of
//     the expression's dump function (ct dumps dreg before key);
//   - attributes with a zero value appear that the batch left out (bitwise op,
//     lookup flags, dynset timeout), and the lookup's set id (batch) becomes its
//     set's name (dump);
//   - nat fills in what the batch implied: the maximum address and port registers
//     (equal to the minimum) and NF_NAT_RANGE_MAP_IPS in its flags;
//   - anonymous sets are named by the kernel (__set%d becomes __set3).
//
// So an expression's attributes are compared as a sorted list with all-zero
// values left out (a missing attribute is the kernel's zero default), nat's
// implied values are filled in, and a lookup of an anonymous set is replaced by
// the set's contents. The nesting of a value is found by decoding it as
// attributes: both sides hold the same bytes, so a value that merely looks nested
// is read the same way on both.

// canonHash accumulates canonical forms into a 64-bit digest: drift detection
// keeps one number per rule and per element, never their bytes.
type canonHash struct{ h hash.Hash64 }

func newCanonHash() canonHash { return canonHash{h: fnv.New64a()} }

func (c canonHash) sum(b []byte) uint64 {
	c.h.Reset()
	_, _ = c.h.Write(b)
	return c.h.Sum64()
}

// nlAttr is one attribute: its type without flags, and its value.
type nlAttr struct {
	typ  uint16
	data []byte
}

// splitAttrs decodes b as a list of attributes; ok is false when b is not one.
func splitAttrs(b []byte) (out []nlAttr, ok bool) {
	for len(b) > 0 {
		if len(b) < nlaHdrLen {
			return nil, false
		}
		l := int(binary.NativeEndian.Uint16(b))
		if l < nlaHdrLen || l > len(b) {
			return nil, false
		}
		out = append(out, nlAttr{typ: binary.NativeEndian.Uint16(b[2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER), data: b[nlaHdrLen:l]})
		next := (l + 3) &^ 3
		if next > len(b) {
			next = len(b)
		}
		b = b[next:]
	}
	return out, true
}

// appendCanonValue appends the canonical form of an attribute value: a sorted
// list of its attributes when it decodes as attributes, else its bytes.
func appendCanonValue(dst, b []byte) []byte {
	as, ok := splitAttrs(b)
	if !ok || len(as) == 0 {
		dst = append(dst, 'x')
		dst = strconv.AppendInt(dst, int64(len(b)), 10)
		dst = append(dst, ':')
		return append(dst, b...)
	}
	return appendCanonAttrs(dst, as, false)
}

// appendCanonAttrs appends as sorted by type (then bytes), each as
// "type{value}"; with dropZero, all-zero values are left out.
func appendCanonAttrs(dst []byte, as []nlAttr, dropZero bool) []byte {
	parts := make([][]byte, 0, len(as))
	for _, a := range as {
		if dropZero && allZero(a.data) {
			continue
		}
		p := strconv.AppendUint(nil, uint64(a.typ), 10)
		p = append(p, '{')
		p = appendCanonValue(p, a.data)
		p = append(p, '}')
		parts = append(parts, p)
	}
	slices.SortFunc(parts, func(a, b []byte) int { return compareBytes(a, b) })
	dst = append(dst, '(')
	for _, p := range parts {
		dst = append(dst, p...)
	}
	return append(dst, ')')
}

func compareBytes(a, b []byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return len(a) - len(b)
}

// anonResolver returns the canonical contents of the anonymous set a lookup
// names by its attributes (the batch: NFTA_LOOKUP_SET_ID; the kernel:
// NFTA_LOOKUP_SET), and whether it is one.
type anonResolver func(lookup map[uint16][]byte) (contents []byte, ok bool)

// appendCanonRule appends the canonical form of a rule's NFTA_RULE_EXPRESSIONS
// and NFTA_RULE_USERDATA (its comment).
func appendCanonRule(dst, exprs, userdata []byte, anon anonResolver) []byte {
	list, _ := splitAttrs(exprs)
	for _, e := range list {
		ea := attrs(e.data)
		name := cstring(ea[unix.NFTA_EXPR_NAME])
		data, _ := splitAttrs(ea[unix.NFTA_EXPR_DATA])
		dst = append(dst, name...)
		switch name {
		case "lookup":
			data = canonLookup(data, anon)
		case "nat":
			data = canonNAT(data)
		}
		dst = appendCanonAttrs(dst, data, true)
		dst = append(dst, ' ')
	}
	dst = append(dst, '|')
	return appendCanonValue(dst, userdata)
}

// canonLookup drops the set id and names an anonymous set by its contents.
func canonLookup(data []nlAttr, anon anonResolver) []nlAttr {
	m := map[uint16][]byte{}
	for _, a := range data {
		m[a.typ] = a.data
	}
	contents, isAnon := anon(m)
	out := make([]nlAttr, 0, len(data))
	for _, a := range data {
		switch a.typ {
		case unix.NFTA_LOOKUP_SET_ID:
			continue
		case unix.NFTA_LOOKUP_SET:
			if isAnon {
				a = nlAttr{typ: a.typ, data: contents}
			}
		}
		out = append(out, a)
	}
	if isAnon && m[unix.NFTA_LOOKUP_SET] == nil {
		out = append(out, nlAttr{typ: unix.NFTA_LOOKUP_SET, data: contents})
	}
	return out
}

// NF_NAT_RANGE_MAP_IPS and NF_NAT_RANGE_PROTO_SPECIFIED (linux/netfilter/nf_nat.h):
// the kernel sets them when the nat expression has address, port registers.
const (
	nfNATRangeMapIPs         = 1
	nfNATRangeProtoSpecified = 2
)

// canonNAT fills in what the kernel derives: the maximum registers and the
// flags that say which registers are given.
func canonNAT(data []nlAttr) []nlAttr {
	m := map[uint16][]byte{}
	for _, a := range data {
		m[a.typ] = a.data
	}
	out := slices.Clone(data)
	if m[unix.NFTA_NAT_REG_ADDR_MAX] == nil && m[unix.NFTA_NAT_REG_ADDR_MIN] != nil {
		out = append(out, nlAttr{typ: unix.NFTA_NAT_REG_ADDR_MAX, data: m[unix.NFTA_NAT_REG_ADDR_MIN]})
	}
	if m[unix.NFTA_NAT_REG_PROTO_MAX] == nil && m[unix.NFTA_NAT_REG_PROTO_MIN] != nil {
		out = append(out, nlAttr{typ: unix.NFTA_NAT_REG_PROTO_MAX, data: m[unix.NFTA_NAT_REG_PROTO_MIN]})
	}
	if m[unix.NFTA_NAT_REG_ADDR_MIN] != nil || m[unix.NFTA_NAT_REG_PROTO_MIN] != nil {
		flags := be32(m[unix.NFTA_NAT_FLAGS])
		if m[unix.NFTA_NAT_REG_ADDR_MIN] != nil {
			flags |= nfNATRangeMapIPs
		}
		if m[unix.NFTA_NAT_REG_PROTO_MIN] != nil {
			flags |= nfNATRangeProtoSpecified
		}
		v := binary.BigEndian.AppendUint32(nil, flags)
		replaced := false
		for i := range out {
			if out[i].typ == unix.NFTA_NAT_FLAGS {
				out[i].data, replaced = v, true
			}
		}
		if !replaced {
			out = append(out, nlAttr{typ: unix.NFTA_NAT_FLAGS, data: v})
		}
	}
	return out
}

// appendCanonPicked appends the canonical form of the attributes of m named by
// types, in that order (an object's definition: the attributes that say what it
// is, not the kernel's bookkeeping such as handles and use counts).
func appendCanonPicked(dst []byte, m map[uint16][]byte, types ...uint16) []byte {
	for _, t := range types {
		v, ok := m[t]
		if !ok || allZero(v) {
			continue
		}
		dst = strconv.AppendUint(dst, uint64(t), 10)
		dst = append(dst, '{')
		dst = appendCanonValue(dst, v)
		dst = append(dst, '}')
	}
	return dst
}

// canonChainDef is the canonical definition of a chain: a base chain without a
// policy has the kernel's default, accept, which is what the kernel dumps.
func canonChainDef(a map[uint16][]byte) []byte {
	if a[unix.NFTA_CHAIN_HOOK] != nil && a[unix.NFTA_CHAIN_POLICY] == nil {
		a = maps.Clone(a)
		a[unix.NFTA_CHAIN_POLICY] = binary.BigEndian.AppendUint32(nil, nfAccept)
	}
	return appendCanonPicked(nil, a, chainDefTypes...)
}

// nfAccept is NF_ACCEPT, a base chain's default policy.
const nfAccept = 1

// nftDataVerdict is NFT_DATA_VERDICT, the data type of a verdict map.
const nftDataVerdict = 0xffffff00

// canonSetDef is the canonical definition of a set or map: the data length of a
// verdict map is left out (the batch does not give it, the kernel dumps its own
// size of a verdict).
//
// Of its user data only the comment counts: the rest (key and data byte order,
// typeof expressions, nft's interval markers) is how nft prints the set, which
// nft writes more of than kproxy's netlink writer does for the same set.
func canonSetDef(a map[uint16][]byte) []byte {
	a = maps.Clone(a)
	if be32(a[unix.NFTA_SET_DATA_TYPE]) == nftDataVerdict {
		delete(a, unix.NFTA_SET_DATA_LEN)
	}
	if ud, ok := a[unix.NFTA_SET_USERDATA]; ok {
		a[unix.NFTA_SET_USERDATA] = udataPick(ud, udataSetComment)
	}
	return appendCanonPicked(nil, a, setDefTypes...)
}

// udataSetComment is NFTNL_UDATA_SET_COMMENT, the comment's TLV in a set's user
// data.
const udataSetComment = 7

// udataPick returns the TLVs (a type byte, a length byte, the value) of user
// data whose type is one of types, in order.
func udataPick(ud []byte, types ...byte) []byte {
	var out []byte
	for len(ud) >= 2 {
		n := 2 + int(ud[1])
		if n > len(ud) {
			break
		}
		if slices.Contains(types, ud[0]) {
			out = append(out, ud[:n]...)
		}
		ud = ud[n:]
	}
	return out
}

// chainDefTypes are the attributes of a chain's definition.
var chainDefTypes = []uint16{unix.NFTA_CHAIN_HOOK, unix.NFTA_CHAIN_TYPE, unix.NFTA_CHAIN_POLICY, nftaChainUserdata}

// setDefTypes are the attributes of a set's or map's definition.
var setDefTypes = []uint16{
	unix.NFTA_SET_FLAGS, unix.NFTA_SET_KEY_TYPE, unix.NFTA_SET_KEY_LEN, unix.NFTA_SET_DATA_TYPE,
	unix.NFTA_SET_DATA_LEN, unix.NFTA_SET_TIMEOUT, unix.NFTA_SET_GC_INTERVAL, unix.NFTA_SET_USERDATA,
}

// nftaSetElemKeyEnd is NFTA_SET_ELEM_KEY_END (linux/netfilter/nf_tables.h), the
// end of an interval of a concatenation, which x/sys/unix does not name.
const nftaSetElemKeyEnd = 10

// elemTypes are the attributes of a set element that say what it is (not its
// expiration, which the kernel counts down).
var elemTypes = []uint16{
	unix.NFTA_SET_ELEM_KEY, nftaSetElemKeyEnd, unix.NFTA_SET_ELEM_DATA,
	unix.NFTA_SET_ELEM_FLAGS, unix.NFTA_SET_ELEM_USERDATA,
}
