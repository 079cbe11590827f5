package nftnetlink

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/kproxy/kproxy/internal/nft"
)

// encodeRule compiles a typed rule (internal/nft) into the expressions, anonymous
// sets and comment nft generates for its printed text: it converts keys and values
// into selectors and bytes and calls the emitters (emit.go), with no text in
// between. family is the table's, "ip" or "ip6". Rules read from text reach it
// too, lowered by internal/nft/nfttext.
func encodeRule(family string, r *nft.Rule, nextID func() uint32) (compiledRule, error) {
	rc := &ruleCompiler{family: family, nextID: nextID}
	for _, s := range r.Stmts {
		if err := rc.typedStmt(s); err != nil {
			return compiledRule{}, err
		}
	}
	if len(rc.out.exprs) == 0 {
		return compiledRule{}, fmt.Errorf("empty rule")
	}
	rc.out.comment = r.Comment
	return rc.out, nil
}

func (rc *ruleCompiler) typedStmt(s nft.Stmt) error {
	switch s := s.(type) {
	case nft.Match:
		return rc.typedMatch(s)
	case nft.MaskedMatch:
		sel, err := rc.keySelector(s.Key)
		if err != nil {
			return err
		}
		if sel.typ.name != "mark" {
			return fmt.Errorf("masked match of %s", sel.typ.name)
		}
		rc.emit(sel.load(1))
		rc.masked(s.Mask, cmpOp(s.Neq), s.Value)
		return nil
	case nft.VMap:
		return rc.typedVMap(s)
	case nft.MarkSet:
		switch s.Op {
		case nft.BitSet:
			rc.emit(&expr.Immediate{Register: 1, Data: hostU32(s.Value)},
				&expr.Meta{Key: expr.MetaKeyMARK, Register: 1, SourceRegister: true})
		case nft.BitOr:
			rc.markSet(markOr, s.Value)
		case nft.BitXor:
			rc.markSet(markXor, s.Value)
		case nft.BitAnd:
			rc.markSet(markAnd, s.Value)
		default:
			return fmt.Errorf("unsupported mark operator %d", s.Op)
		}
		return nil
	case nft.Counter:
		rc.counter(s.Name)
		return nil
	case nft.Update:
		sels, err := rc.keySelectors(s.Keys)
		if err != nil {
			return err
		}
		op := uint32(unix.NFT_DYNSET_OP_UPDATE)
		if s.Add {
			op = unix.NFT_DYNSET_OP_ADD
		}
		return rc.dynset(op, s.Set, sels)
	case nft.DNAT:
		return rc.typedNAT(expr.NATTypeDestNAT, s.To, s.NoPort)
	case nft.SNAT:
		return rc.typedNAT(expr.NATTypeSourceNAT, s.To, s.NoPort)
	case nft.DNATMap:
		return rc.typedDNATMap(s)
	case nft.Masquerade:
		rc.emit(&expr.Masq{FullyRandom: s.FullyRandom, Random: s.Random, Persistent: s.Persistent})
		return nil
	case nft.Reject:
		rc.reject()
		return nil
	case nft.Verdict:
		v, err := verdictExpr(s)
		if err != nil {
			return err
		}
		rc.emit(v)
		return nil
	}
	return fmt.Errorf("unsupported statement %T", s)
}

// typedNAT rewrites to a fixed address and, unless noPort, port.
func (rc *ruleCompiler) typedNAT(typ expr.NATType, to netip.AddrPort, noPort bool) error {
	n, addrType := natFamily(typ, rc.family == "ip6")
	addr, err := addrBytes(addrType, to.Addr())
	if err != nil {
		return err
	}
	var port []byte
	if !noPort {
		port = binary.BigEndian.AppendUint16(nil, to.Port())
	}
	rc.natTo(n, addr, port)
	return nil
}

func cmpOp(neq bool) expr.CmpOp {
	if neq {
		return expr.CmpOpNeq
	}
	return expr.CmpOpEq
}

var verdictKinds = [...]expr.VerdictKind{
	nft.Accept: expr.VerdictAccept, nft.Drop: expr.VerdictDrop, nft.Return: expr.VerdictReturn,
	nft.Continue: expr.VerdictContinue, nft.Jump: expr.VerdictJump, nft.Goto: expr.VerdictGoto,
}

func verdictExpr(v nft.Verdict) (*expr.Verdict, error) {
	if v.Kind == 0 || int(v.Kind) >= len(verdictKinds) {
		return nil, fmt.Errorf("unsupported verdict %d", v.Kind)
	}
	if (v.Kind == nft.Jump || v.Kind == nft.Goto) != (v.Chain != "") {
		return nil, fmt.Errorf("verdict %d with chain %q", v.Kind, v.Chain)
	}
	return &expr.Verdict{Kind: verdictKinds[v.Kind], Chain: v.Chain}, nil
}

// keySelector is the selector of a typed key.
func (rc *ruleCompiler) keySelector(k nft.Key) (*selector, error) {
	switch k.Kind {
	case nft.KeyIPSaddr, nft.KeyIPDaddr, nft.KeyIP6Saddr, nft.KeyIP6Daddr:
		ip6 := k.Kind == nft.KeyIP6Saddr || k.Kind == nft.KeyIP6Daddr
		if ip6 != (rc.family == "ip6") {
			return nil, fmt.Errorf("address selector of another family in a %s table", rc.family)
		}
		return addrSelector(ip6, k.Kind == nft.KeyIPDaddr || k.Kind == nft.KeyIP6Daddr), nil
	case nft.KeyTHDport:
		return portSelector(true, 0), nil
	case nft.KeyTHSport:
		return portSelector(false, 0), nil
	case nft.KeyTCPDport:
		return portSelector(true, protocols["tcp"]), nil
	case nft.KeyUDPDport:
		return portSelector(true, protocols["udp"]), nil
	case nft.KeySCTPDport:
		return portSelector(true, protocols["sctp"]), nil
	case nft.KeyL4Proto:
		return l4protoSelector(), nil
	case nft.KeyMark:
		return markSelector(), nil
	case nft.KeyIIFName:
		return ifnameSelector(expr.MetaKeyIIFNAME), nil
	case nft.KeyOIFName:
		return ifnameSelector(expr.MetaKeyOIFNAME), nil
	case nft.KeyCtState, nft.KeyCtStatus:
		return ctSelector(k.Kind == nft.KeyCtStatus), nil
	case nft.KeyFibSaddrType, nft.KeyFibDaddrType:
		return fibSelector(k.Kind == nft.KeyFibDaddrType), nil
	case nft.KeyNumgen:
		if k.Mod == 0 {
			return nil, fmt.Errorf("bad numgen modulus")
		}
		return numgenSelector(k.Mod, k.Offset), nil
	}
	return nil, fmt.Errorf("unsupported key %d", k.Kind)
}

func (rc *ruleCompiler) keySelectors(keys []nft.Key) ([]*selector, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("empty key")
	}
	sels := make([]*selector, len(keys))
	for i, k := range keys {
		s, err := rc.keySelector(k)
		if err != nil {
			return nil, err
		}
		sels[i] = s
	}
	return sels, nil
}

// typedMatch: concatenations only look up named sets; one selector compares with
// a value, a set or a named set.
func (rc *ruleCompiler) typedMatch(m nft.Match) error {
	sels, err := rc.keySelectors(m.Keys)
	if err != nil {
		return err
	}
	for _, s := range sels {
		if s.dep != 0 {
			return fmt.Errorf("protocol selectors are only supported in nat map keys")
		}
	}
	if len(sels) > 1 {
		for _, s := range sels {
			if s.kind != "" {
				return fmt.Errorf("%s cannot be concatenated", s.typ.name)
			}
		}
		ref, ok := m.Value.(nft.SetRef)
		if !ok {
			return fmt.Errorf("a concatenation is only compared with a named set")
		}
		rc.loadKey(sels)
		rc.lookup(string(ref), m.Neq)
		return nil
	}
	s := sels[0]
	switch s.kind {
	case "ct-bitmask":
		var mask uint32
		switch v := m.Value.(type) {
		case nft.CtState:
			mask = uint32(v)
		case nft.CtStatus:
			mask = uint32(v)
		default:
			return fmt.Errorf("ct match with %T", m.Value)
		}
		if (m.Keys[0].Kind == nft.KeyCtStatus) != isCtStatus(m.Value) || mask == 0 {
			return fmt.Errorf("ct match with %T %d", m.Value, mask)
		}
		rc.bitmask(s, m.Neq, mask)
		return nil
	case "fib":
		t, ok := m.Value.(nft.FibType)
		if !ok {
			return fmt.Errorf("fib match with %T", m.Value)
		}
		rc.emit(s.load(1), &expr.Cmp{Op: cmpOp(m.Neq), Register: 1, Data: hostU32(uint32(t))})
		return nil
	}
	rc.emit(s.load(1))
	switch v := m.Value.(type) {
	case nft.SetRef:
		rc.lookup(string(v), m.Neq)
		return nil
	case nft.Set:
		if len(v) == 1 {
			return rc.typedValue(s, cmpOp(m.Neq), v[0])
		}
		return rc.typedSet(s.typ, v, m.Neq)
	}
	return rc.typedValue(s, cmpOp(m.Neq), m.Value)
}

func isCtStatus(v nft.Value) bool { _, ok := v.(nft.CtStatus); return ok }

// typedValue compares register 1 (loaded by s) with one value.
func (rc *ruleCompiler) typedValue(s *selector, op expr.CmpOp, v nft.Value) error {
	switch v := v.(type) {
	case nft.Prefix:
		iv, err := prefixInterval(s.typ, netip.Prefix(v))
		if err != nil {
			return err
		}
		rc.prefixMatch(op, iv)
		return nil
	case nft.Range:
		iv, err := rangeInterval(s.typ, v)
		if err != nil {
			return err
		}
		if op == expr.CmpOpEq {
			rc.emit(&expr.Cmp{Op: expr.CmpOpGte, Register: 1, Data: iv.first}, &expr.Cmp{Op: expr.CmpOpLte, Register: 1, Data: iv.last})
		} else {
			rc.emit(&expr.Range{Op: expr.CmpOpNeq, Register: 1, FromData: iv.first, ToData: iv.last})
		}
		return nil
	case nft.Ifname:
		if s.typ.name != "ifname" {
			return fmt.Errorf("interface name compared with %s", s.typ.name)
		}
		if v.Wildcard {
			rc.emit(&expr.Cmp{Op: op, Register: 1, Data: []byte(v.Name)})
			return nil
		}
	}
	b, err := valueBytes(s.typ, v)
	if err != nil {
		return err
	}
	rc.emit(&expr.Cmp{Op: op, Register: 1, Data: b})
	return nil
}

// typedSet compares register 1 with an anonymous set: an interval set when an
// element is a prefix or a range.
func (rc *ruleCompiler) typedSet(t dataType, set nft.Set, invert bool) error {
	isInterval := false
	ivs := make([]interval, 0, len(set))
	for _, v := range set {
		var iv interval
		var err error
		switch v := v.(type) {
		case nft.Prefix:
			iv, err = prefixInterval(t, netip.Prefix(v))
		case nft.Range:
			iv, err = rangeInterval(t, v)
		default:
			b, err := valueBytes(t, v)
			if err != nil {
				return err
			}
			ivs = append(ivs, interval{b, b})
			continue
		}
		if err != nil {
			return err
		}
		isInterval = true
		ivs = append(ivs, iv)
	}
	rc.anonLookup(t, ivs, isInterval, invert)
	return nil
}

// rangeInterval is the interval of addresses of a range of type t.
func rangeInterval(t dataType, r nft.Range) (interval, error) {
	first, err := addrBytes(t, r.From)
	if err != nil {
		return interval{}, err
	}
	last, err := addrBytes(t, r.To)
	if err != nil {
		return interval{}, err
	}
	return interval{first, last}, nil
}

func (rc *ruleCompiler) typedVMap(v nft.VMap) error {
	sels, err := rc.keySelectors(v.Keys)
	if err != nil {
		return err
	}
	for _, s := range sels {
		if s.dep != 0 {
			return fmt.Errorf("protocol selectors are only supported in nat map keys")
		}
		if s.kind != "" {
			// ct and fib values are only compared.
			return fmt.Errorf("%s cannot be a map key", s.typ.name)
		}
	}
	key := rc.loadKey(sels)
	if v.Map != "" {
		rc.vmap(key, v.Map, nil)
		return nil
	}
	elems := make([]anonElem, len(v.Elems))
	for i, e := range v.Elems {
		k, err := elemKeyBytes(key, e)
		if err != nil {
			return err
		}
		verdict, err := verdictExpr(e.Verdict)
		if err != nil {
			return err
		}
		elems[i] = anonElem{key: k, verdict: verdict}
	}
	rc.vmap(key, "", elems)
	return nil
}

// elemKeyBytes is the key of an anonymous verdict map's element: its number, or
// the concatenation of its fields, each padded to 32 bits.
func elemKeyBytes(key keyType, e nft.VMapElem) ([]byte, error) {
	if e.Fields == nil {
		if len(key.fields) != 1 {
			return nil, fmt.Errorf("a number as the key of a concatenation")
		}
		return valueBytes(key.fields[0], nft.Num(e.Key))
	}
	if len(e.Fields) != len(key.fields) {
		return nil, fmt.Errorf("element of %d fields, key of %d", len(e.Fields), len(key.fields))
	}
	out := make([]byte, 0, key.size())
	for i, f := range key.fields {
		b, err := valueBytes(f, e.Fields[i])
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
		if key.concat() {
			out = append(out, make([]byte, padded(len(b))-len(b))...)
		}
	}
	return out, nil
}

func (rc *ruleCompiler) typedDNATMap(d nft.DNATMap) error {
	if (d.Family == nft.IPv6) != (rc.family == "ip6") {
		return fmt.Errorf("nat of another family in a %s table", rc.family)
	}
	sels, err := rc.keySelectors(d.Keys)
	if err != nil {
		return err
	}
	n, addrType := natFamily(expr.NATTypeDestNAT, rc.family == "ip6")
	if d.Map != "" {
		return rc.natMap(n, addrType, sels, d.Map, nil)
	}
	if len(sels) != 1 {
		return fmt.Errorf("anonymous nat maps of concatenations are not supported")
	}
	elems := make([]anonElem, len(d.Elems))
	for i, e := range d.Elems {
		k, err := valueBytes(sels[0].typ, nft.Num(e.Key))
		if err != nil {
			return err
		}
		addr, err := addrBytes(addrType, e.To.Addr())
		if err != nil {
			return err
		}
		// address . port, each padded to 32 bits as in a concatenation.
		data := make([]byte, 0, padded(addrType.size)+4)
		data = append(data, addr...)
		data = append(data, make([]byte, padded(len(addr))-len(addr))...)
		data = append(binary.BigEndian.AppendUint16(data, e.To.Port()), 0, 0)
		elems[i] = anonElem{key: k, data: data}
	}
	return rc.natMap(n, addrType, sels, "", elems)
}

// valueBytes is the register content of one value of type t, as encodeValue
// writes it for the value's text.
func valueBytes(t dataType, v nft.Value) ([]byte, error) {
	switch v := v.(type) {
	case nft.Addr:
		return addrBytes(t, netip.Addr(v))
	case nft.Num:
		switch t.name {
		case "inet_service":
			if v > 0xffff {
				return nil, fmt.Errorf("bad port %d", v)
			}
			return binary.BigEndian.AppendUint16(nil, uint16(v)), nil
		case "inet_proto":
			if v > 0xff {
				return nil, fmt.Errorf("bad protocol %d", v)
			}
			return []byte{byte(v)}, nil
		case "integer", "mark":
			return hostU32(uint32(v)), nil
		}
	case nft.Proto:
		if t.name == "inet_proto" {
			return []byte{byte(v)}, nil
		}
	case nft.Ifname:
		if t.name == "ifname" && !v.Wildcard {
			if len(v.Name) >= 16 {
				return nil, fmt.Errorf("interface name %q too long", v.Name)
			}
			b := make([]byte, 16)
			copy(b, v.Name)
			return b, nil
		}
	}
	return nil, fmt.Errorf("value %T is not of type %s", v, t.name)
}

func addrBytes(t dataType, a netip.Addr) ([]byte, error) {
	if (t.name != "ipv4_addr" && t.name != "ipv6_addr") || (t.name == "ipv4_addr") != a.Is4() {
		return nil, fmt.Errorf("address %s is not of type %s", a, t.name)
	}
	return a.AsSlice(), nil
}

// prefixInterval is the interval of addresses of a prefix of type t.
func prefixInterval(t dataType, p netip.Prefix) (interval, error) {
	first, err := addrBytes(t, p.Masked().Addr())
	if err != nil || !p.IsValid() {
		return interval{}, fmt.Errorf("bad prefix %s for %s", p, t.name)
	}
	return interval{first, lastOfPrefix(first, p.Bits())}, nil
}
