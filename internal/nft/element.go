package nft

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"strconv"
)

// DataType is an nft datatype of a set's key or a map's data.
type DataType uint8

const (
	TypeVerdict DataType = iota + 1
	TypeInteger
	TypeIPv4Addr
	TypeIPv6Addr
	TypeEtherAddr
	TypeInetProto
	TypeInetService
	TypeMark
	TypeIfname
)

var dataTypeNames = [...]string{
	TypeVerdict: "verdict", TypeInteger: "integer", TypeIPv4Addr: "ipv4_addr", TypeIPv6Addr: "ipv6_addr",
	TypeEtherAddr: "ether_addr", TypeInetProto: "inet_proto", TypeInetService: "inet_service",
	TypeMark: "mark", TypeIfname: "ifname",
}

// String is the type's nft name ("ipv4_addr"); empty for an unknown type.
func (t DataType) String() string {
	if int(t) >= len(dataTypeNames) {
		return ""
	}
	return dataTypeNames[t]
}

// DataTypeNamed is the datatype nft names name.
func DataTypeNamed(name string) (DataType, bool) {
	for t, n := range dataTypeNames {
		if n == name && n != "" {
			return DataType(t), true
		}
	}
	return 0, false
}

// SetType is the type of a set (Key) or map (Key : Data), given by datatypes
// (nft's "type") or, when KeyOf is set, by the expressions whose types they are
// (nft's "typeof", needed for numgen keys, whose integer type nft cannot name);
// Key and Data are then empty. The renderer shares SetTypes between containers:
// the slices are never modified.
type SetType struct {
	Key, Data     []DataType
	KeyOf, DataOf []Key
}

// IsTypeof reports whether t is declared by expressions.
func (t *SetType) IsTypeof() bool { return len(t.KeyOf) > 0 }

// Equal reports whether t and u are the same type declaration.
func (t *SetType) Equal(u *SetType) bool {
	return slices.Equal(t.Key, u.Key) && slices.Equal(t.Data, u.Data) && slices.Equal(t.KeyOf, u.KeyOf) && slices.Equal(t.DataOf, u.DataOf)
}

// AppendText appends the type as nft writes it after "type" or "typeof"
// ("ipv4_addr . inet_proto . inet_service : verdict", "ip daddr . tcp dport .
// numgen random mod 1 : ip daddr . tcp dport").
func (t *SetType) AppendText(b []byte) []byte {
	if t.IsTypeof() {
		b = appendKeys(b, t.KeyOf)
		if len(t.DataOf) > 0 {
			b = append(b, " : "...)
			b = appendKeys(b, t.DataOf)
		}
		return b
	}
	b = appendDataTypes(b, t.Key)
	if len(t.Data) > 0 {
		b = append(b, " : "...)
		b = appendDataTypes(b, t.Data)
	}
	return b
}

// Text is AppendText as a string.
func (t *SetType) Text() string { return string(t.AppendText(nil)) }

func appendDataTypes(b []byte, ts []DataType) []byte {
	for i, d := range ts {
		if i > 0 {
			b = append(b, " . "...)
		}
		b = append(b, d.String()...)
	}
	return b
}

// Elem is an element's key, or a map element's value: a concatenation of fields
// (addresses, protocols, numbers, interface names) or a verdict, packed into a
// string of a tag byte and the field's bytes per field, so that the ~10^5 elements
// of a State are small, comparable values (an IPv4 dispatch key takes 10 bytes, its
// text 21). The zero Elem is no element (a set element's value). Build one with
// ElemBuf or VerdictElem; AppendText prints nft's text.
type Elem struct{ s string }

// FieldKind is the kind of one field of an Elem.
type FieldKind uint8

const (
	FieldIPv4    FieldKind = iota + 1 // 4 address bytes
	FieldIPv6                         // 16 address bytes
	FieldProto                        // 1 byte
	FieldNum16                        // a number up to 65535, 2 bytes big-endian
	FieldNum32                        // a larger number, 4 bytes big-endian
	FieldIfname                       // 1 length byte, then the name
	fieldVerdict                      // the verdict kind's byte, then the chain (the whole Elem)
)

var fieldSizes = [...]int{FieldIPv4: 4, FieldIPv6: 16, FieldProto: 1, FieldNum16: 2, FieldNum32: 4}

// Field is one field of an Elem: its kind and its bytes (for an interface name,
// the name).
type Field struct {
	Kind FieldKind
	Raw  string
}

// Num is the value of a FieldNum16, FieldNum32 or FieldProto.
func (f Field) Num() uint32 {
	switch f.Kind {
	case FieldProto:
		return uint32(f.Raw[0])
	case FieldNum16:
		return uint32(binary.BigEndian.Uint16([]byte(f.Raw)))
	case FieldNum32:
		return binary.BigEndian.Uint32([]byte(f.Raw))
	}
	return 0
}

// String is the field's text.
func (f Field) String() string { return string(f.appendText(nil)) }

func (f Field) appendText(b []byte) []byte {
	switch f.Kind {
	case FieldIPv4:
		return netip.AddrFrom4([4]byte([]byte(f.Raw))).AppendTo(b)
	case FieldIPv6:
		return netip.AddrFrom16([16]byte([]byte(f.Raw))).AppendTo(b)
	case FieldProto:
		return Proto(f.Raw[0]).appendText(b)
	case FieldNum16, FieldNum32:
		return strconv.AppendUint(b, uint64(f.Num()), 10)
	}
	return append(b, f.Raw...)
}

// ElemBuf builds an Elem field by field, in a buffer the caller provides
// (ElemBuf(buf[:0])).
type ElemBuf []byte

// Addr appends an address field.
func (e ElemBuf) Addr(a netip.Addr) ElemBuf {
	if a.Is4() {
		b := a.As4()
		return append(append(e, byte(FieldIPv4)), b[:]...)
	}
	b := a.As16()
	return append(append(e, byte(FieldIPv6)), b[:]...)
}

// Proto appends a protocol field.
func (e ElemBuf) Proto(p Proto) ElemBuf { return append(e, byte(FieldProto), byte(p)) }

// Num appends a number (a port, a numgen slot, a mark).
func (e ElemBuf) Num(n uint32) ElemBuf {
	if n <= 0xffff {
		return binary.BigEndian.AppendUint16(append(e, byte(FieldNum16)), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(e, byte(FieldNum32)), n)
}

// Ifname appends an interface name (at most 255 bytes; nft's limit is 15).
func (e ElemBuf) Ifname(name string) ElemBuf {
	name = name[:min(len(name), 255)]
	return append(append(e, byte(FieldIfname), byte(len(name))), name...)
}

// Elem is the element built.
func (e ElemBuf) Elem() Elem { return Elem{string(e)} }

// VerdictElem is a map element's verdict value ("goto CHAIN", "drop").
func VerdictElem(v Verdict) Elem {
	return Elem{string([]byte{byte(fieldVerdict), byte(v.Kind)}) + v.Chain}
}

// IsZero reports whether e is no element.
func (e Elem) IsZero() bool { return e.s == "" }

// Verdict is e's verdict; ok is false when e is not a verdict.
func (e Elem) Verdict() (v Verdict, ok bool) {
	if len(e.s) < 2 || FieldKind(e.s[0]) != fieldVerdict {
		return Verdict{}, false
	}
	return Verdict{Kind: VerdictKind(e.s[1]), Chain: e.s[2:]}, true
}

// AppendFields appends the fields of e (none for a verdict) to dst.
func (e Elem) AppendFields(dst []Field) []Field {
	s := e.s
	for len(s) > 0 {
		k := FieldKind(s[0])
		s = s[1:]
		var n int
		switch {
		case k == FieldIfname && len(s) > 0:
			n = int(s[0])
			s = s[1:]
		case k >= FieldIPv4 && k < FieldIfname:
			n = fieldSizes[k]
		default:
			return dst
		}
		if len(s) < n {
			return dst
		}
		dst = append(dst, Field{Kind: k, Raw: s[:n]})
		s = s[n:]
	}
	return dst
}

// AppendText appends e as nft writes it: fields joined by " . ", or the verdict.
func (e Elem) AppendText(b []byte) []byte {
	if v, ok := e.Verdict(); ok {
		return v.appendText(b)
	}
	var buf [8]Field
	for i, f := range e.AppendFields(buf[:0]) {
		if i > 0 {
			b = append(b, " . "...)
		}
		b = f.appendText(b)
	}
	return b
}

// String is e's text.
func (e Elem) String() string { return string(e.AppendText(nil)) }

// CompareText orders elements by their text, the order of the renderer's output.
func CompareText(a, b Elem) int {
	if a == b {
		return 0
	}
	var x, y [96]byte
	return bytes.Compare(a.AppendText(x[:0]), b.AppendText(y[:0]))
}
