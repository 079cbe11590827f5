package nftnetlink

import (
	"fmt"
	"strconv"
	"strings"
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

// parseTypeof parses the expressions of "typeof A . B [: C . D]" (words after
// "typeof"). Only concatenations are supported: nft records single expressions
// with a byte order this package does not model.
func parseTypeof(words []string, isMap bool) (key keyType, data *keyType, ud udata, err error) {
	keyWords := words
	var dataWords []string
	if isMap {
		i := indexOf(words, ":")
		if i < 0 {
			return key, nil, nil, fmt.Errorf("map typeof without \":\"")
		}
		keyWords, dataWords = words[:i], words[i+1:]
	}
	keyExprs, err := typeofConcat(keyWords)
	if err != nil {
		return key, nil, nil, err
	}
	var dataExprs []typeofExpr
	if isMap {
		if dataExprs, err = typeofConcat(dataWords); err != nil {
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

// typeofConcat parses "A . B . …" (at least two expressions).
func typeofConcat(words []string) ([]typeofExpr, error) {
	var out []typeofExpr
	start := 0
	for i := 0; i <= len(words); i++ {
		if i < len(words) && words[i] != "." {
			continue
		}
		e, err := typeofOne(words[start:i])
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		start = i + 1
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("typeof of a single expression is not supported (only concatenations)")
	}
	return out, nil
}

// typeofOne parses one expression: ip|ip6 saddr|daddr, th|tcp|udp|sctp
// sport|dport, meta l4proto, numgen random mod N [offset O].
func typeofOne(w []string) (typeofExpr, error) {
	payload := func(t dataType, desc, field uint32) typeofExpr {
		return typeofExpr{typ: t, udata: udata(nil).u32(0, exprTypePayload).nested(1, udata(nil).u32(0, desc).u32(1, field))}
	}
	switch s := strings.Join(w, " "); s {
	case "ip saddr":
		return payload(dataTypes["ipv4_addr"], protoDescIP, 11), nil
	case "ip daddr":
		return payload(dataTypes["ipv4_addr"], protoDescIP, 12), nil
	case "ip6 saddr":
		return payload(dataTypes["ipv6_addr"], protoDescIP6, 8), nil
	case "ip6 daddr":
		return payload(dataTypes["ipv6_addr"], protoDescIP6, 9), nil
	case "th sport":
		return payload(dataTypes["inet_service"], protoDescTH, 1), nil
	case "th dport":
		return payload(dataTypes["inet_service"], protoDescTH, 2), nil
	case "tcp sport":
		return payload(dataTypes["inet_service"], protoDescTCP, 1), nil
	case "tcp dport":
		return payload(dataTypes["inet_service"], protoDescTCP, 2), nil
	case "udp sport":
		return payload(dataTypes["inet_service"], protoDescUDP, 1), nil
	case "udp dport":
		return payload(dataTypes["inet_service"], protoDescUDP, 2), nil
	case "sctp sport":
		return payload(dataTypes["inet_service"], protoDescSCTP, 1), nil
	case "sctp dport":
		return payload(dataTypes["inet_service"], protoDescSCTP, 2), nil
	case "meta l4proto":
		return typeofExpr{typ: dataTypes["inet_proto"], udata: udata(nil).u32(0, exprTypeMeta).nested(1, udata(nil).u32(0, metaKeyL4proto))}, nil
	}
	if len(w) >= 4 && w[0] == "numgen" && w[1] == "random" && w[2] == "mod" && (len(w) == 4 || len(w) == 6 && w[4] == "offset") {
		mod, err := strconv.ParseUint(w[3], 10, 32)
		if err != nil || mod == 0 {
			return typeofExpr{}, fmt.Errorf("bad numgen modulus %q", w[3])
		}
		var offset uint64
		if len(w) == 6 {
			if offset, err = strconv.ParseUint(w[5], 10, 32); err != nil {
				return typeofExpr{}, fmt.Errorf("bad numgen offset %q", w[5])
			}
		}
		return typeofExpr{typ: dataTypes["integer"], udata: udata(nil).u32(0, exprTypeNumgen).nested(1,
			udata(nil).u32(0, numgenRandom).u32(1, uint32(mod)).u32(2, uint32(offset)))}, nil
	}
	return typeofExpr{}, fmt.Errorf("unsupported typeof expression %q", strings.Join(w, " "))
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
