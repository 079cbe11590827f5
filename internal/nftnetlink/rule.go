package nftnetlink

import (
	"encoding/binary"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// anonSet is an anonymous set or map a rule needs ("{ … }" or "vmap { … }"); the
// translator creates it in the batch just before the rule and binds it by id.
type anonSet struct {
	id       uint32
	key      keyType
	data     *keyType // nil for sets
	interval bool
	elems    []anonElem
}

type anonElem struct {
	key     []byte
	flags   uint32 // NFT_SET_ELEM_INTERVAL_END
	open    bool   // interval without end element (NFTNL_SET_ELEM_F_INTERVAL_OPEN)
	verdict *expr.Verdict
	data    []byte
}

// compiledRule is the netlink form of one rule.
type compiledRule struct {
	exprs   []expr.Any
	comment string
	anon    []*anonSet
}

// ruleCompiler compiles a typed rule (encode.go) into the expressions nft 1.0.6
// generates for its text (emit.go).
type ruleCompiler struct {
	family string // "ip" or "ip6"
	out    compiledRule
	nextID func() uint32
}

func (rc *ruleCompiler) emit(e ...expr.Any) { rc.out.exprs = append(rc.out.exprs, e...) }

// reg converts an offset in 32-bit words into nft's register number: 128-bit
// registers (1-4) when aligned, 32-bit registers (8-23) otherwise.
func reg(word int) uint32 {
	if word%4 == 0 {
		return uint32(1 + word/4)
	}
	return uint32(unix.NFT_REG32_00 + word)
}

// selector is a value loaded into a register.
type selector struct {
	load func(r uint32) expr.Any
	typ  dataType
	len  int    // bytes loaded
	kind string // "ct-bitmask" for ct state/status, "fib" for fib type
	// dep is the protocol a "tcp|udp|sctp dport" selector depends on: nft matches
	// "meta l4proto" first.
	dep byte
}

func payload(base expr.PayloadBase, off, n int) func(uint32) expr.Any {
	return func(r uint32) expr.Any {
		return &expr.Payload{OperationType: expr.PayloadLoad, DestRegister: r, Base: base, Offset: uint32(off), Len: uint32(n)}
	}
}

func meta(k expr.MetaKey) func(uint32) expr.Any {
	return func(r uint32) expr.Any { return &expr.Meta{Key: k, Register: r} }
}

func hostU32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

// prefixBits returns the prefix length of a CIDR interval.
func prefixBits(iv interval) int {
	bits := 0
	for i := range iv.first {
		x := iv.first[i] ^ iv.last[i]
		if x == 0 {
			bits += 8
			continue
		}
		for x&0x80 == 0 {
			bits++
			x <<= 1
		}
		break
	}
	return bits
}
