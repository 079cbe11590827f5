package nftnetlink

import (
	"fmt"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The expressions of each rule statement, called by the typed encoder (encode.go)
// once it has converted a statement's keys and values into selectors, bytes and
// verdicts. Each writes what nft 1.0.6 generates for the statement's text.

// Selectors, as the text names them ("ip daddr", "tcp dport", "numgen random mod 3").

func addrSelector(ip6, daddr bool) *selector {
	t, n, off := dataTypes["ipv4_addr"], 4, 12
	if ip6 {
		t, n, off = dataTypes["ipv6_addr"], 16, 8
	}
	if daddr {
		off += n
	}
	return &selector{load: payload(expr.PayloadBaseNetworkHeader, off, n), typ: t, len: n}
}

// portSelector is "th sport|dport" (dep 0) or "tcp|udp|sctp sport|dport" (dep the
// protocol number).
func portSelector(dport bool, dep byte) *selector {
	off := 0
	if dport {
		off = 2
	}
	return &selector{load: payload(expr.PayloadBaseTransportHeader, off, 2), typ: dataTypes["inet_service"], len: 2, dep: dep}
}

func l4protoSelector() *selector {
	return &selector{load: meta(expr.MetaKeyL4PROTO), typ: dataTypes["inet_proto"], len: 1}
}

func markSelector() *selector {
	return &selector{load: meta(expr.MetaKeyMARK), typ: dataTypes["mark"], len: 4}
}

func ifnameSelector(key expr.MetaKey) *selector {
	return &selector{load: meta(key), typ: dataTypes["ifname"], len: 16}
}

func ctSelector(status bool) *selector {
	key := expr.CtKeySTATE
	if status {
		key = expr.CtKeySTATUS
	}
	return &selector{load: func(r uint32) expr.Any { return &expr.Ct{Register: r, Key: key} }, typ: dataTypes["integer"], len: 4, kind: "ct-bitmask"}
}

func fibSelector(daddr bool) *selector {
	f := &expr.Fib{ResultADDRTYPE: true, FlagSADDR: !daddr, FlagDADDR: daddr}
	return &selector{load: func(r uint32) expr.Any { g := *f; g.Register = r; return &g }, typ: dataTypes["integer"], len: 4, kind: "fib"}
}

func numgenSelector(mod, offset uint32) *selector {
	return &selector{load: func(r uint32) expr.Any {
		return &expr.Numgen{Register: r, Modulus: mod, Type: unix.NFT_NG_RANDOM, Offset: offset}
	}, typ: dataTypes["integer"], len: 4}
}

// loadKey loads the selectors of a key (one, or a concatenation) into consecutive
// registers, as nft does, and returns the key's type.
func (rc *ruleCompiler) loadKey(sels []*selector) keyType {
	var key keyType
	word := 0
	for _, s := range sels {
		rc.emit(s.load(reg(word)))
		word += padded(s.len) / 4
		key.fields = append(key.fields, s.typ)
	}
	return key
}

// lookup compares the key in register 1 with the named set: "@set", "!= @set".
func (rc *ruleCompiler) lookup(set string, invert bool) {
	rc.emit(&expr.Lookup{SourceRegister: 1, SetName: set, Invert: invert})
}

// vmap looks the key in register 1 up in a verdict map: the named map set, or the
// anonymous map of elems when set is "".
func (rc *ruleCompiler) vmap(key keyType, set string, elems []anonElem) {
	l := &expr.Lookup{SourceRegister: 1, DestRegister: 0, IsDestRegSet: true, SetName: set}
	if set == "" {
		a := rc.newAnon(key, &keyType{fields: []dataType{dataTypes["verdict"]}}, elems)
		l.SetName, l.SetID = "__map%d", a.id
	}
	rc.emit(l)
}

// newAnon adds an anonymous set or map (data nil for a set) to the rule.
func (rc *ruleCompiler) newAnon(key keyType, data *keyType, elems []anonElem) *anonSet {
	a := &anonSet{id: rc.nextID(), key: key, data: data, elems: elems}
	rc.out.anon = append(rc.out.anon, a)
	return a
}

// anonLookup compares the key in register 1 with an anonymous set of values or,
// when isInterval, of ranges.
func (rc *ruleCompiler) anonLookup(t dataType, ivs []interval, isInterval, invert bool) {
	a := &anonSet{id: rc.nextID(), key: keyType{fields: []dataType{t}}, interval: isInterval}
	if !isInterval {
		for _, iv := range ivs {
			a.elems = append(a.elems, anonElem{key: iv.first})
		}
	} else {
		a.elems = intervalElements(ivs)
	}
	rc.out.anon = append(rc.out.anon, a)
	rc.emit(&expr.Lookup{SourceRegister: 1, SetName: "__set%d", SetID: a.id, Invert: invert})
}

// bitmask loads a ct state/status and tests it: "ct state new" is a flag test,
// "ct state != new" nft compares with the exact value.
func (rc *ruleCompiler) bitmask(s *selector, invert bool, mask uint32) {
	if invert {
		rc.emit(s.load(1), &expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: hostU32(mask)})
		return
	}
	rc.emit(s.load(1),
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: hostU32(mask), Xor: hostU32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: hostU32(0)})
}

// masked compares register 1 AND mask with v: "mark and M [!=] V".
func (rc *ruleCompiler) masked(mask uint32, op expr.CmpOp, v uint32) {
	rc.emit(&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: hostU32(mask), Xor: hostU32(0)},
		&expr.Cmp{Op: op, Register: 1, Data: hostU32(v & mask)})
}

// prefixMatch compares the address in register 1 with a prefix, given as its
// interval.
func (rc *ruleCompiler) prefixMatch(op expr.CmpOp, iv interval) {
	bits := prefixBits(iv)
	if bits%8 == 0 && bits > 0 {
		// Load only the prefix bytes, as nft does.
		load := rc.out.exprs[len(rc.out.exprs)-1].(*expr.Payload)
		load.Len = uint32(bits / 8)
		rc.emit(&expr.Cmp{Op: op, Register: 1, Data: iv.first[:bits/8]})
		return
	}
	mask := make([]byte, len(iv.first))
	for i := range mask {
		mask[i] = ^(iv.first[i] ^ iv.last[i])
	}
	rc.emit(&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: uint32(len(mask)), Mask: mask, Xor: make([]byte, len(mask))},
		&expr.Cmp{Op: op, Register: 1, Data: iv.first})
}

// Mark operators of markSet.
const (
	markOr = iota + 1
	markXor
	markAnd
)

// markSet sets the mark to the mark combined with v: "mark set mark or|xor|and V".
func (rc *ruleCompiler) markSet(op int, v uint32) {
	var mask, xor uint32
	switch op {
	case markOr:
		mask, xor = ^v, v
	case markXor:
		mask, xor = 0xffffffff, v
	case markAnd:
		mask, xor = v, 0
	}
	rc.emit(&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: hostU32(mask), Xor: hostU32(xor)},
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1, SourceRegister: true})
}

// dynset adds the key of sels to set, or updates it ("add|update @set { key }").
func (rc *ruleCompiler) dynset(op uint32, set string, sels []*selector) error {
	for _, s := range sels {
		if s.kind != "" {
			return fmt.Errorf("%s cannot be a set key", s.typ.name)
		}
	}
	rc.loadKey(sels)
	rc.emit(&expr.Dynset{SrcRegKey: 1, SetName: set, Operation: op})
	return nil
}

// natFamily returns the NAT expression of a "dnat|snat [ip|ip6]" statement and the
// address type of its family.
func natFamily(nat expr.NATType, ip6 bool) (*expr.NAT, dataType) {
	if ip6 {
		return &expr.NAT{Type: nat, Family: unix.NFPROTO_IPV6}, dataTypes["ipv6_addr"]
	}
	return &expr.NAT{Type: nat, Family: unix.NFPROTO_IPV4}, dataTypes["ipv4_addr"]
}

// natTo rewrites to a fixed address and, unless port is nil, port: "dnat to a:p".
func (rc *ruleCompiler) natTo(n *expr.NAT, addr, port []byte) {
	rc.emit(&expr.Immediate{Register: 1, Data: addr})
	n.RegAddrMin = 1
	if port != nil {
		rc.emit(&expr.Immediate{Register: 2, Data: port})
		n.RegProtoMin = 2
		n.Specified = true
	}
	rc.emit(n)
}

// natMap rewrites address and port to the value of the key of sels in the named
// map set or, when set is "", in the anonymous map of elems: "dnat ip addr . port
// to KEY map @set|{ … }".
func (rc *ruleCompiler) natMap(n *expr.NAT, addrType dataType, sels []*selector, set string, elems []anonElem) error {
	var dep byte
	for _, s := range sels {
		if s.kind != "" || (s.dep != 0 && dep != 0 && s.dep != dep) {
			return fmt.Errorf("unsupported nat map key")
		}
		if s.dep != 0 {
			dep = s.dep
		}
	}
	if dep != 0 {
		// nft puts the protocol dependency of "tcp dport" first.
		rc.emit(meta(expr.MetaKeyL4PROTO)(1), &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{dep}})
	}
	key := rc.loadKey(sels)
	l := &expr.Lookup{SourceRegister: 1, DestRegister: 1, IsDestRegSet: true, SetName: set}
	if set == "" {
		// A named map's key and data types are the map's business; an anonymous
		// one maps a number to address . port.
		if len(key.fields) != 1 {
			return fmt.Errorf("anonymous nat maps of concatenations are not supported")
		}
		a := rc.newAnon(key, natMapData(addrType), elems)
		l.SetName, l.SetID = "__map%d", a.id
	}
	rc.emit(l)
	n.RegAddrMin = 1
	n.RegProtoMin = reg(padded(addrType.size) / 4)
	rc.emit(n)
	return nil
}

// natMapData is the data type of an anonymous nat map: address . port.
func natMapData(addrType dataType) *keyType {
	return &keyType{fields: []dataType{addrType, dataTypes["inet_service"]}}
}

// reject is nft's default reject: ICMP port unreachable, or ICMPv6's.
func (rc *ruleCompiler) reject() {
	if rc.family == "ip6" {
		rc.emit(&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 4}) // ICMPV6_PORT_UNREACH
	} else {
		rc.emit(&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 3}) // ICMP_PORT_UNREACH
	}
}

// counter counts in an anonymous counter or, with a name, in the named counter
// (nft's objref expression; the name is sent NUL-terminated, as nft does).
func (rc *ruleCompiler) counter(name string) {
	if name == "" {
		rc.emit(&expr.Counter{})
		return
	}
	rc.emit(&expr.Objref{Type: nftObjectCounter, Name: name + "\x00"})
}
