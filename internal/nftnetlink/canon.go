package nftnetlink

import (
	"encoding/binary"
	"slices"

	"golang.org/x/sys/unix"
)

// Canonical forms: how the kernel's dumps and kproxy's own batches are reduced to
// the same 64-bit hash when they describe the same object, so that drift
// detection (inventory.go) can compare what the kernel holds with what was
// written.
//
// A dump is not the batch that created it. Measured on the renderer's
// expected-output cases, written by kproxy's netlink writer and by the nft command
// (TestInventoryOfWrittenTableMatchesKernel, TestInventoryOfNftWrittenTable keep it
// so):
//   - nested attributes lose NLA_F_NESTED, and attributes come in the order of
//     the expression's dump function (ct dumps dreg before key);
//   - attributes with a zero value appear that the batch left out (bitwise op,
//     lookup flags, dynset timeout), and the lookup's set id (batch) becomes its
//     set's name (dump);
//   - nat fills in what the batch implied: the maximum address and port registers
//     (equal to the minimum) and NF_NAT_RANGE_MAP_IPS, NF_NAT_RANGE_PROTO_SPECIFIED
//     in its flags;
//   - anonymous sets are named by the kernel (__set%d becomes __set3);
//   - a base chain without a policy dumps the default, accept; a verdict map dumps
//     the kernel's size of a verdict as its data length; nft writes more user data
//     into a set (byte orders, typeof expressions) than kproxy's writer does.
//
// So an expression's attributes are hashed as a sorted list with all-zero values
// left out (a missing attribute is the kernel's zero default), nat's implied
// values are filled in, a lookup of an anonymous set hashes the set's contents,
// and a set's user data counts by its comment only. The nesting of a value is
// found by decoding it as attributes: both sides hold the same bytes, so a value
// that merely looks nested is read the same way on both. Nothing here allocates:
// a drift check at 10,000 Services hashes a few hundred thousand objects.

// FNV-1a, 64 bits.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvBytes(h uint64, b []byte) uint64 {
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}

func fnvU64(h, v uint64) uint64 {
	for range 8 {
		h ^= v & 0xff
		h *= fnvPrime
		v >>= 8
	}
	return h
}

// nextAttr decodes the first attribute of b: its type without flags, its value
// and what follows it; ok is false when b does not start with a whole attribute.
func nextAttr(b []byte) (typ uint16, data, rest []byte, ok bool) {
	if len(b) < nlaHdrLen {
		return 0, nil, nil, false
	}
	l := int(binary.NativeEndian.Uint16(b))
	if l < nlaHdrLen || l > len(b) {
		return 0, nil, nil, false
	}
	typ = binary.NativeEndian.Uint16(b[2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
	next := min((l+3)&^3, len(b))
	return typ, b[nlaHdrLen:l], b[next:], true
}

// isAttrList reports whether b decodes, whole, as one or more attributes.
func isAttrList(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for len(b) > 0 {
		var ok bool
		if _, _, b, ok = nextAttr(b); !ok {
			return false
		}
	}
	return true
}

// attrGet returns the value of the first attribute of type typ in the list b.
func attrGet(b []byte, typ uint16) ([]byte, bool) {
	for len(b) > 0 {
		t, data, rest, ok := nextAttr(b)
		if !ok {
			return nil, false
		}
		if t == typ {
			return data, true
		}
		b = rest
	}
	return nil, false
}

// typedHash is one attribute of a list being hashed.
type typedHash struct {
	typ uint16
	h   uint64
}

// maxListAttrs bounds the attributes of one list hashed without allocating; a
// longer list (none that kproxy writes) spills to the heap.
const maxListAttrs = 24

// valueHash is the canonical hash of an attribute's value: of its attributes as
// a sorted list when it decodes as attributes, else of its bytes.
func valueHash(b []byte) uint64 {
	if !isAttrList(b) {
		return fnvBytes(fnvU64(fnvOffset^'x', uint64(len(b))), b)
	}
	var arr [maxListAttrs]typedHash
	hs := arr[:0]
	for len(b) > 0 {
		t, data, rest, _ := nextAttr(b)
		hs = append(hs, typedHash{t, valueHash(data)})
		b = rest
	}
	return sortedHash(hs)
}

// sortedHash hashes a list of attributes in (type, hash) order.
func sortedHash(hs []typedHash) uint64 {
	for i := 1; i < len(hs); i++ {
		for j := i; j > 0 && less(hs[j], hs[j-1]); j-- {
			hs[j], hs[j-1] = hs[j-1], hs[j]
		}
	}
	h := uint64(fnvOffset ^ 'L')
	for _, a := range hs {
		h = fnvU64(fnvU64(h, uint64(a.typ)), a.h)
	}
	return h
}

func less(a, b typedHash) bool { return a.typ < b.typ || a.typ == b.typ && a.h < b.h }

// anonResolver returns the hash of the contents of the anonymous set a lookup
// names (the batch: by NFTA_LOOKUP_SET_ID; the kernel: by NFTA_LOOKUP_SET), and
// whether it names one. lookup is the expression's attribute list.
type anonResolver func(lookup []byte) (contents uint64, ok bool)

// ruleHash is the canonical hash of a rule: its NFTA_RULE_EXPRESSIONS in order,
// then its NFTA_RULE_USERDATA (its comment).
func ruleHash(exprs, userdata []byte, anon anonResolver) uint64 {
	h := uint64(fnvOffset)
	for b := exprs; len(b) > 0; {
		_, e, rest, ok := nextAttr(b)
		if !ok {
			break
		}
		b = rest
		name, _ := attrGet(e, unix.NFTA_EXPR_NAME)
		data, _ := attrGet(e, unix.NFTA_EXPR_DATA)
		h = fnvU64(fnvBytes(h, name), exprHash(cstringBytes(name), data, anon))
	}
	return fnvU64(fnvU64(h, 'U'), valueHash(userdata))
}

// cstringBytes is a NUL-terminated string attribute without its NUL.
func cstringBytes(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// exprHash is the canonical hash of one expression's data: its attributes,
// sorted, without all-zero values, with lookup's and nat's normalisations.
func exprHash(name, data []byte, anon anonResolver) uint64 {
	var arr [maxListAttrs]typedHash
	hs := arr[:0]
	isLookup, isNAT := string(name) == "lookup", string(name) == "nat"
	var anonContents uint64
	isAnon := false
	if isLookup {
		anonContents, isAnon = anon(data)
	}
	var addrMin, protoMin []byte
	hasAddrMax, hasProtoMax := false, false
	var flags uint32
	for b := data; len(b) > 0; {
		t, v, rest, ok := nextAttr(b)
		if !ok {
			break
		}
		b = rest
		switch {
		case isLookup && t == unix.NFTA_LOOKUP_SET_ID:
			continue
		case isLookup && t == unix.NFTA_LOOKUP_SET && isAnon:
			hs = append(hs, typedHash{t, anonContents})
			continue
		case isNAT && t == unix.NFTA_NAT_FLAGS:
			flags = be32(v)
			continue
		case isNAT && t == unix.NFTA_NAT_REG_ADDR_MIN:
			addrMin = v
		case isNAT && t == unix.NFTA_NAT_REG_PROTO_MIN:
			protoMin = v
		case isNAT && t == unix.NFTA_NAT_REG_ADDR_MAX:
			hasAddrMax = true
		case isNAT && t == unix.NFTA_NAT_REG_PROTO_MAX:
			hasProtoMax = true
		}
		if allZero(v) {
			continue
		}
		hs = append(hs, typedHash{t, valueHash(v)})
	}
	if isAnon && !containsType(hs, unix.NFTA_LOOKUP_SET) {
		hs = append(hs, typedHash{unix.NFTA_LOOKUP_SET, anonContents})
	}
	if isNAT {
		if addrMin != nil {
			flags |= nfNATRangeMapIPs
			if !hasAddrMax && !allZero(addrMin) {
				hs = append(hs, typedHash{unix.NFTA_NAT_REG_ADDR_MAX, valueHash(addrMin)})
			}
		}
		if protoMin != nil {
			flags |= nfNATRangeProtoSpecified
			if !hasProtoMax && !allZero(protoMin) {
				hs = append(hs, typedHash{unix.NFTA_NAT_REG_PROTO_MAX, valueHash(protoMin)})
			}
		}
		if flags != 0 {
			var v [4]byte
			binary.BigEndian.PutUint32(v[:], flags)
			hs = append(hs, typedHash{unix.NFTA_NAT_FLAGS, valueHash(v[:])})
		}
	}
	return sortedHash(hs)
}

func containsType(hs []typedHash, t uint16) bool {
	for _, a := range hs {
		if a.typ == t {
			return true
		}
	}
	return false
}

// NF_NAT_RANGE_MAP_IPS and NF_NAT_RANGE_PROTO_SPECIFIED (linux/netfilter/nf_nat.h):
// the kernel sets them when the nat expression has address, port registers.
const (
	nfNATRangeMapIPs         = 1
	nfNATRangeProtoSpecified = 2
)

// pickedHash hashes the attributes of the list b named by types, in that order
// (an object's definition: the attributes that say what it is, not the kernel's
// bookkeeping such as handles and use counts); all-zero values count as absent.
func pickedHash(b []byte, types ...uint16) uint64 {
	h := uint64(fnvOffset ^ 'P')
	for _, t := range types {
		v, ok := attrGet(b, t)
		if !ok || allZero(v) {
			continue
		}
		h = fnvU64(fnvU64(h, uint64(t)), valueHash(v))
	}
	return h
}

// nfAccept is NF_ACCEPT, a base chain's default policy.
const nfAccept = 1

// chainDefHash is the canonical hash of a chain's definition (hook, type,
// priority, policy, comment): a base chain without a policy has the kernel's
// default, accept, which is what the kernel dumps.
func chainDefHash(msg []byte) uint64 {
	h := pickedHash(msg, unix.NFTA_CHAIN_HOOK, unix.NFTA_CHAIN_TYPE, nftaChainUserdata)
	policy, ok := attrGet(msg, unix.NFTA_CHAIN_POLICY)
	_, base := attrGet(msg, unix.NFTA_CHAIN_HOOK)
	switch {
	case ok:
	case base:
		var v [4]byte
		binary.BigEndian.PutUint32(v[:], nfAccept)
		policy = v[:]
	default:
		return h
	}
	return fnvU64(fnvU64(h, unix.NFTA_CHAIN_POLICY), valueHash(policy))
}

// nftDataVerdict is NFT_DATA_VERDICT, the data type of a verdict map.
const nftDataVerdict = 0xffffff00

// udataSetComment is NFTNL_UDATA_SET_COMMENT, the comment's TLV in a set's user
// data.
const udataSetComment = 7

// setDefHash is the canonical hash of a set's or map's definition (type, flags,
// timeout, comment): a verdict map's data length is left out (the batch does not
// give it, the kernel dumps its own size of a verdict), and of its user data only
// the comment counts: the rest (key and data byte order, typeof expressions, nft's
// interval markers) is how nft prints the set, which nft writes more of than
// kproxy's netlink writer does for the same set.
func setDefHash(msg []byte) uint64 {
	h := pickedHash(msg, unix.NFTA_SET_FLAGS, unix.NFTA_SET_KEY_TYPE, unix.NFTA_SET_KEY_LEN, unix.NFTA_SET_DATA_TYPE,
		unix.NFTA_SET_TIMEOUT, unix.NFTA_SET_GC_INTERVAL)
	if dt, _ := attrGet(msg, unix.NFTA_SET_DATA_TYPE); be32(dt) != nftDataVerdict {
		if v, ok := attrGet(msg, unix.NFTA_SET_DATA_LEN); ok && !allZero(v) {
			h = fnvU64(fnvU64(h, unix.NFTA_SET_DATA_LEN), valueHash(v))
		}
	}
	if ud, ok := attrGet(msg, unix.NFTA_SET_USERDATA); ok {
		h = fnvBytes(fnvU64(h, unix.NFTA_SET_USERDATA), udataComment(ud, udataSetComment))
	}
	return h
}

// udataComment returns the TLV (a type byte, a length byte, the value) of user
// data whose type is typ, nil when there is none.
func udataComment(ud []byte, typ byte) []byte {
	for len(ud) >= 2 {
		n := 2 + int(ud[1])
		if n > len(ud) {
			break
		}
		if ud[0] == typ {
			return ud[:n]
		}
		ud = ud[n:]
	}
	return nil
}

// nftaSetElemKeyEnd is NFTA_SET_ELEM_KEY_END (linux/netfilter/nf_tables.h), the
// end of an interval of a concatenation, which x/sys/unix does not name.
const nftaSetElemKeyEnd = 10

// elemHash is the canonical hash of a set element: what it is (key, interval
// end, value, flags, comment), not its expiration, which the kernel counts down.
func elemHash(elem []byte) uint64 {
	return pickedHash(elem, unix.NFTA_SET_ELEM_KEY, nftaSetElemKeyEnd, unix.NFTA_SET_ELEM_DATA,
		unix.NFTA_SET_ELEM_FLAGS, unix.NFTA_SET_ELEM_USERDATA)
}

// elemKeyHash is the hash of what identifies a set element (its key and interval
// end): a deletion names an element by its key only.
func elemKeyHash(elem []byte) uint64 {
	return pickedHash(elem, unix.NFTA_SET_ELEM_KEY, nftaSetElemKeyEnd)
}

// elementsHash is the canonical hash of an anonymous set: its definition's hash
// and its elements' hashes, in sorted order (scratch is reused between calls).
func elementsHash(def uint64, list []byte, scratch *[]uint64) uint64 {
	hs := (*scratch)[:0]
	for b := list; len(b) > 0; {
		_, e, rest, ok := nextAttr(b)
		if !ok {
			break
		}
		hs = append(hs, elemHash(e))
		b = rest
	}
	slices.Sort(hs)
	h := fnvU64(fnvOffset^'A', def)
	for _, e := range hs {
		h = fnvU64(h, e)
	}
	*scratch = hs
	return h
}
