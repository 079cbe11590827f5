package nftnetlink

import (
	"fmt"

	"github.com/kproxy/kproxy/internal/nft"
)

// A set or map declared with "typeof" gets its key (and data) types from
// expressions, and nft records those expressions in the set's userdata so that it
// can print "typeof …" back. The executor supports the concatenations the renderer
// uses for its endpoint maps, e.g.
//
//	typeof ip daddr . tcp dport . numgen random mod 1 : ip daddr . tcp dport
//
// and writes the userdata nft 1.0.6 writes for them (checked against sets created
// by nft, see equivalence_test.go).

// Userdata record types (libnftnl udata.h, NFTNL_UDATA_SET_*).
const (
	udataSetKeyTypeof    = 3
	udataSetDataTypeof   = 4
	udataSetDataInterval = 6
)

// nft's expression type numbers (enum expr_types) and its protocol description and
// template numbers, as recorded in typeof userdata.
const (
	exprTypeConcat  = 13
	exprTypePayload = 7
	exprTypeMeta    = 9
	exprTypeNumgen  = 23

	protoDescUDP  = 6
	protoDescTCP  = 8
	protoDescSCTP = 10
	protoDescTH   = 11
	protoDescIP   = 12
	protoDescIP6  = 13

	metaKeyL4proto = 16 // NFT_META_L4PROTO
	numgenRandom   = 1  // NFT_NG_RANDOM
)

// typeofExpr is one expression of a typeof declaration: its datatype and the
// userdata nft records for it (type, then nested data).
type typeofExpr struct {
	typ   dataType
	udata udata
}

// typeofSpec is the key (and map data) type and the userdata of "typeof keyOf [:
// dataOf]". Only concatenations are supported: nft records single expressions
// with a byte order this package does not model.
func typeofSpec(keyOf, dataOf []nft.Key, isMap bool) (key keyType, data *keyType, ud udata, err error) {
	if isMap != (len(dataOf) > 0) {
		return key, nil, nil, fmt.Errorf("typeof with data for a set, or without for a map")
	}
	keyExprs, err := typeofConcat(keyOf)
	if err != nil {
		return key, nil, nil, err
	}
	var dataExprs []typeofExpr
	if isMap {
		if dataExprs, err = typeofConcat(dataOf); err != nil {
			return key, nil, nil, err
		}
	}
	for _, e := range keyExprs {
		key.fields = append(key.fields, e.typ)
	}
	// Byte orders of concatenations are "invalid" (0), as nft records them.
	ud = udata(nil).u32(0, orderInvalid)
	if isMap {
		ud = ud.u32(1, orderInvalid)
	}
	ud = ud.nested(udataSetKeyTypeof, concatUdata(keyExprs))
	if isMap {
		d := keyType{}
		for _, e := range dataExprs {
			d.fields = append(d.fields, e.typ)
		}
		data = &d
		ud = ud.nested(udataSetDataTypeof, concatUdata(dataExprs)).u32(udataSetDataInterval, 0)
	}
	return key, data, ud, nil
}

// typeofConcat is the expressions of a concatenation of keys (at least two).
func typeofConcat(keys []nft.Key) ([]typeofExpr, error) {
	if len(keys) < 2 {
		return nil, fmt.Errorf("typeof of a single expression is not supported (only concatenations)")
	}
	out := make([]typeofExpr, len(keys))
	for i, k := range keys {
		e, err := typeofOne(k)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// typeofOne is one expression: ip|ip6 saddr|daddr, th sport|dport, tcp|udp|sctp
// dport, meta l4proto, numgen random mod N [offset O].
func typeofOne(k nft.Key) (typeofExpr, error) {
	payload := func(t dataType, desc, field uint32) typeofExpr {
		return typeofExpr{typ: t, udata: udata(nil).u32(0, exprTypePayload).nested(1, udata(nil).u32(0, desc).u32(1, field))}
	}
	switch k.Kind {
	case nft.KeyIPSaddr:
		return payload(dataTypes["ipv4_addr"], protoDescIP, 11), nil
	case nft.KeyIPDaddr:
		return payload(dataTypes["ipv4_addr"], protoDescIP, 12), nil
	case nft.KeyIP6Saddr:
		return payload(dataTypes["ipv6_addr"], protoDescIP6, 8), nil
	case nft.KeyIP6Daddr:
		return payload(dataTypes["ipv6_addr"], protoDescIP6, 9), nil
	case nft.KeyTHSport:
		return payload(dataTypes["inet_service"], protoDescTH, 1), nil
	case nft.KeyTHDport:
		return payload(dataTypes["inet_service"], protoDescTH, 2), nil
	case nft.KeyTCPDport:
		return payload(dataTypes["inet_service"], protoDescTCP, 2), nil
	case nft.KeyUDPDport:
		return payload(dataTypes["inet_service"], protoDescUDP, 2), nil
	case nft.KeySCTPDport:
		return payload(dataTypes["inet_service"], protoDescSCTP, 2), nil
	case nft.KeyL4Proto:
		return typeofExpr{typ: dataTypes["inet_proto"], udata: udata(nil).u32(0, exprTypeMeta).nested(1, udata(nil).u32(0, metaKeyL4proto))}, nil
	case nft.KeyNumgen:
		if k.Mod == 0 {
			return typeofExpr{}, fmt.Errorf("bad numgen modulus 0")
		}
		return typeofExpr{typ: dataTypes["integer"], udata: udata(nil).u32(0, exprTypeNumgen).nested(1,
			udata(nil).u32(0, numgenRandom).u32(1, k.Mod).u32(2, k.Offset))}, nil
	}
	return typeofExpr{}, fmt.Errorf("unsupported typeof expression %q", k.String())
}

// concatUdata is the userdata of a concatenation: its type, then each expression
// as a nested record numbered by position.
func concatUdata(exprs []typeofExpr) udata {
	var list udata
	for i, e := range exprs {
		list = list.nested(byte(i), e.udata)
	}
	return udata(nil).u32(0, exprTypeConcat).nested(1, list)
}
