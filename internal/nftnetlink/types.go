package nftnetlink

import (
	"encoding/binary"
	"fmt"

	"github.com/kproxy/kproxy/internal/nft"
)

// byteOrder values as nft stores them in set userdata (NFTNL_UDATA_SET_KEYBYTEORDER).
const (
	orderInvalid uint32 = 0
	orderHost    uint32 = 1
	orderBig     uint32 = 2
)

// dataType is one nft datatype the renderer's sets, maps and rules use. id is nft's
// type number (datatype.h); nft encodes a concatenation as the ids shifted by 6 bits.
type dataType struct {
	name  string
	id    uint32
	size  int // bytes in a register
	order uint32
}

var dataTypes = map[string]dataType{
	"verdict":      {"verdict", 1, 0, orderInvalid},
	"integer":      {"integer", 4, 4, orderHost},
	"ipv4_addr":    {"ipv4_addr", 7, 4, orderBig},
	"ipv6_addr":    {"ipv6_addr", 8, 16, orderBig},
	"ether_addr":   {"ether_addr", 9, 6, orderBig},
	"inet_proto":   {"inet_proto", 12, 1, orderBig},
	"inet_service": {"inet_service", 13, 2, orderBig},
	"mark":         {"mark", 19, 4, orderHost},
	"ifname":       {"ifname", 41, 16, orderHost},
}

// dataTypeByID inverts dataTypes, for sets read back from the kernel.
func dataTypeByID(id uint32) (dataType, bool) {
	for _, t := range dataTypes {
		if t.id == id {
			return t, true
		}
	}
	return dataType{}, false
}

const concatTypeBits = 6

// keyType is a set key or map value: one datatype or a concatenation.
type keyType struct {
	fields []dataType
}

func (k keyType) concat() bool { return len(k.fields) > 1 }

// id is the type number nft sends in NFTA_SET_KEY_TYPE / NFTA_SET_DATA_TYPE.
func (k keyType) id() uint32 {
	if len(k.fields) == 1 && k.fields[0].name == "verdict" {
		return 0xffffff00 // NFT_DATA_VERDICT
	}
	var id uint32
	for _, f := range k.fields {
		id = id<<concatTypeBits | f.id
	}
	return id
}

// size is the key length: fields of a concatenation are padded to 32-bit registers.
func (k keyType) size() int {
	if len(k.fields) == 1 {
		return k.fields[0].size
	}
	n := 0
	for _, f := range k.fields {
		n += padded(f.size)
	}
	return n
}

// order is the byte order nft records for the key (invalid for concatenations).
func (k keyType) order() uint32 {
	if len(k.fields) == 1 {
		return k.fields[0].order
	}
	return orderInvalid
}

func (k keyType) isVerdict() bool { return len(k.fields) == 1 && k.fields[0].name == "verdict" }

func padded(n int) int { return (n + 3) &^ 3 }

// keyTypeOf is the key type of the datatypes ts (a set's key or a map's data).
func keyTypeOf(ts []nft.DataType) (keyType, error) {
	if len(ts) == 0 {
		return keyType{}, fmt.Errorf("empty type")
	}
	k := keyType{fields: make([]dataType, len(ts))}
	for i, d := range ts {
		t, ok := dataTypes[d.String()]
		if !ok {
			return k, fmt.Errorf("unsupported datatype %d", d)
		}
		k.fields[i] = t
	}
	return k, nil
}

// keyTypeFromID decodes the type number of a set read back from the kernel.
func keyTypeFromID(id uint32, size int) (keyType, error) {
	if id == 0xffffff00 {
		return keyType{fields: []dataType{dataTypes["verdict"]}}, nil
	}
	var k keyType
	for id != 0 {
		t, ok := dataTypeByID(id & (1<<concatTypeBits - 1))
		if !ok {
			return k, fmt.Errorf("unsupported datatype number %d", id&(1<<concatTypeBits-1))
		}
		k.fields = append([]dataType{t}, k.fields...)
		id >>= concatTypeBits
	}
	if len(k.fields) == 0 || k.size() != size {
		return k, fmt.Errorf("cannot decode set type %#x with length %d", id, size)
	}
	return k, nil
}

var protocols = map[string]byte{"tcp": 6, "udp": 17, "sctp": 132}

// encodeField appends the register bytes of field f as a value of type t.
func encodeField(dst []byte, t dataType, f nft.Field) ([]byte, error) {
	switch {
	case t.name == "ipv4_addr" && f.Kind == nft.FieldIPv4, t.name == "ipv6_addr" && f.Kind == nft.FieldIPv6:
		return append(dst, f.Raw...), nil
	case t.name == "inet_proto" && (f.Kind == nft.FieldProto || f.Kind == nft.FieldNum16 && f.Num() <= 0xff):
		return append(dst, byte(f.Num())), nil
	case t.name == "inet_service" && f.Kind == nft.FieldNum16:
		return append(dst, f.Raw...), nil
	case (t.name == "integer" || t.name == "mark") && (f.Kind == nft.FieldNum16 || f.Kind == nft.FieldNum32):
		return binary.NativeEndian.AppendUint32(dst, f.Num()), nil
	case t.name == "ifname" && f.Kind == nft.FieldIfname:
		if len(f.Raw) >= 16 {
			return nil, fmt.Errorf("interface name %q too long", f.Raw)
		}
		var b [16]byte
		copy(b[:], f.Raw)
		return append(dst, b[:]...), nil
	}
	return nil, fmt.Errorf("bad %s %q", t.name, f.String())
}

// appendKey appends the encoding of e (its fields read into scratch) as a value
// of k to out.
func appendKey(out []byte, k keyType, e nft.Elem, scratch *[]nft.Field) ([]byte, error) {
	fields := e.AppendFields((*scratch)[:0])
	*scratch = fields
	if len(fields) != len(k.fields) {
		return nil, fmt.Errorf("value %q has %d fields, type has %d", e.String(), len(fields), len(k.fields))
	}
	for i, f := range k.fields {
		var err error
		start := len(out)
		if out, err = encodeField(out, f, fields[i]); err != nil {
			return nil, err
		}
		if k.concat() {
			for len(out)-start < padded(f.size) {
				out = append(out, 0)
			}
		}
	}
	return out, nil
}

// interval is a closed range of an address type, for interval sets.
type interval struct{ first, last []byte }

// lastOfPrefix is the last address of the prefix of first (masked) and bits.
func lastOfPrefix(first []byte, bits int) []byte {
	last := append([]byte(nil), first...)
	for i := range last {
		bitsBefore := i * 8
		switch {
		case bitsBefore >= bits:
			last[i] = 0xff
		case bitsBefore+8 > bits:
			last[i] |= 0xff >> (bits - bitsBefore)
		}
	}
	return last
}
