package nfttext

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/kproxy/kproxy/internal/nft"
)

// Lower turns a parsed rule of a table of family f into internal/nft's typed rule,
// the representation the netlink encoder writes, so that a rule read from text
// reaches the kernel exactly as the same rule built by the renderer. It fails on
// anything outside the typed vocabulary (internal/nft's doc.go): that is syntax
// kproxy does not write.
func Lower(r *Rule, f nft.Family) (*nft.Rule, error) {
	out := &nft.Rule{Stmts: make([]nft.Stmt, 0, len(r.Stmts)), Comment: r.Comment}
	for _, st := range r.Stmts {
		s, err := lowerStmt(st, f)
		if err != nil {
			return nil, err
		}
		out.Stmts = append(out.Stmts, s)
	}
	return out, nil
}

func lowerStmt(st Stmt, f nft.Family) (nft.Stmt, error) {
	switch st := st.(type) {
	case Match:
		return lowerMatch(st)
	case VMap:
		return lowerVMap(st)
	case Verdict:
		return st.Lower()
	case Reject:
		if len(st.With) != 0 {
			return nil, fmt.Errorf("reject with %s is not supported", strings.Join(st.With, " "))
		}
		return nft.Reject{}, nil
	case Counter:
		if st.Values {
			return nil, fmt.Errorf("counter values in a rule are not supported")
		}
		return nft.Counter{Name: st.Name}, nil
	case MarkSet:
		return lowerMarkSet(st)
	case NAT:
		return lowerNAT(st, f)
	case Masquerade:
		var m nft.Masquerade
		for _, fl := range st.Flags {
			switch fl {
			case "random":
				m.Random = true
			case "fully-random":
				m.FullyRandom = true
			case "persistent":
				m.Persistent = true
			}
		}
		return m, nil
	case Dynset:
		if st.Timeout != "" {
			return nil, fmt.Errorf("timeout in a set update is not supported")
		}
		keys, err := lowerKeys(st.Key)
		if err != nil {
			return nil, err
		}
		return nft.Update{Set: st.Set, Keys: keys, Add: st.Op == "add"}, nil
	}
	return nil, fmt.Errorf("unsupported statement %T", st)
}

var verdictKinds = map[string]nft.VerdictKind{
	"accept": nft.Accept, "drop": nft.Drop, "return": nft.Return,
	"continue": nft.Continue, "jump": nft.Jump, "goto": nft.Goto,
}

// Lower is the typed verdict of v.
func (v Verdict) Lower() (nft.Verdict, error) {
	k, ok := verdictKinds[v.Kind]
	if !ok {
		return nft.Verdict{}, fmt.Errorf("unsupported verdict %q", v.Kind)
	}
	return nft.Verdict{Kind: k, Chain: v.Chain}, nil
}

var keyKinds = map[string]nft.KeyKind{
	"ip saddr": nft.KeyIPSaddr, "ip daddr": nft.KeyIPDaddr, "ip6 saddr": nft.KeyIP6Saddr, "ip6 daddr": nft.KeyIP6Daddr,
	"th dport": nft.KeyTHDport, "th sport": nft.KeyTHSport, "tcp dport": nft.KeyTCPDport, "udp dport": nft.KeyUDPDport,
	"sctp dport": nft.KeySCTPDport, "meta l4proto": nft.KeyL4Proto, "meta mark": nft.KeyMark,
	"meta iifname": nft.KeyIIFName, "meta oifname": nft.KeyOIFName, "ct state": nft.KeyCtState,
	"ct status": nft.KeyCtStatus, "fib saddr type": nft.KeyFibSaddrType, "fib daddr type": nft.KeyFibDaddrType,
	"numgen random": nft.KeyNumgen,
}

// lowerKey is the typed key of a selector without bitwise operations.
func lowerKey(s Selector) (nft.Key, error) {
	k, ok := keyKinds[s.Name]
	if !ok || s.Iface != "" {
		return nft.Key{}, fmt.Errorf("unsupported selector %s", s.Name)
	}
	if len(s.Ops) != 0 {
		return nft.Key{}, fmt.Errorf("bitwise operations on %s are only supported in a match", s.Name)
	}
	return nft.Key{Kind: k, Mod: s.Mod, Offset: s.Offset}, nil
}

func lowerKeys(e Expr) ([]nft.Key, error) {
	keys := make([]nft.Key, len(e))
	for i, s := range e {
		k, err := lowerKey(s)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	return keys, nil
}

func lowerMatch(m Match) (nft.Stmt, error) {
	if len(m.Left) == 1 && len(m.Left[0].Ops) > 0 {
		return lowerMaskedMatch(m)
	}
	keys, err := lowerKeys(m.Left)
	if err != nil {
		return nil, err
	}
	out := nft.Match{Keys: keys, Neq: m.Neq}
	if m.Set != "" {
		out.Value = nft.SetRef(m.Set)
		return out, nil
	}
	if len(keys) != 1 {
		return nil, fmt.Errorf("a concatenation is only compared with a named set")
	}
	t := m.Left[0].Type
	if t == "ct_state" || t == "ct_status" {
		if m.Braced {
			return nil, fmt.Errorf("%s compared with a set", m.Left[0].Name)
		}
		out.Value, err = lowerFlags(t, m.Elems)
		return out, err
	}
	if !m.Braced && len(m.Elems) != 1 {
		return nil, fmt.Errorf("a list of values of %s", m.Left[0].Name)
	}
	values := make(nft.Set, len(m.Elems))
	for i, e := range m.Elems {
		if values[i], err = lowerValue(t, e[0]); err != nil {
			return nil, err
		}
	}
	if m.Braced {
		out.Value = values
	} else {
		out.Value = values[0]
	}
	return out, nil
}

// lowerMaskedMatch lowers "mark and M [!=] V".
func lowerMaskedMatch(m Match) (nft.Stmt, error) {
	s := m.Left[0]
	if s.Name != "meta mark" || len(s.Ops) != 1 || s.Ops[0].Op != '&' || m.Set != "" || m.Braced || len(m.Elems) != 1 {
		return nil, fmt.Errorf("unsupported bitwise match of %s", s.Name)
	}
	v, err := parseU32(m.Elems[0][0])
	if err != nil {
		return nil, err
	}
	return nft.MaskedMatch{Key: nft.Mark, Mask: s.Ops[0].Value, Neq: m.Neq, Value: v}, nil
}

// lowerFlags ORs the ct state or status names of elems.
func lowerFlags(t string, elems [][]string) (nft.Value, error) {
	var bits uint32
	for _, e := range elems {
		var bit uint32
		ok := false
		if t == "ct_state" {
			var s nft.CtState
			s, ok = nft.CtStateNamed(e[0])
			bit = uint32(s)
		} else {
			var s nft.CtStatus
			s, ok = nft.CtStatusNamed(e[0])
			bit = uint32(s)
		}
		if !ok {
			return nil, fmt.Errorf("unsupported %s %q", t, e[0])
		}
		bits |= bit
	}
	if t == "ct_state" {
		return nft.CtState(bits), nil
	}
	return nft.CtStatus(bits), nil
}

// lowerValue is the typed value of one word compared with a selector of type t.
func lowerValue(t, w string) (nft.Value, error) {
	switch t {
	case "ipv4_addr", "ipv6_addr":
		if lo, hi, ok := strings.Cut(w, "-"); ok {
			a, err1 := netip.ParseAddr(lo)
			b, err2 := netip.ParseAddr(hi)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("bad %s range %q", t, w)
			}
			return nft.Range{From: a, To: b}, nil
		}
		if strings.Contains(w, "/") {
			p, err := netip.ParsePrefix(w)
			if err != nil {
				return nil, fmt.Errorf("bad %s prefix %q: %w", t, w, err)
			}
			return nft.Prefix(p), nil
		}
		a, err := netip.ParseAddr(w)
		if err != nil {
			return nil, fmt.Errorf("bad %s %q: %w", t, w, err)
		}
		return nft.Addr(a), nil
	case "inet_proto":
		if p, ok := nft.ProtoNamed(w); ok {
			return p, nil
		}
		n, err := strconv.ParseUint(w, 10, 8)
		if err != nil {
			return nil, fmt.Errorf("bad protocol %q", w)
		}
		return nft.Proto(n), nil
	case "inet_service":
		n, err := strconv.ParseUint(w, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("bad port %q", w)
		}
		return nft.Num(n), nil
	case "mark", "integer":
		n, err := parseU32(w)
		return nft.Num(n), err
	case "ifname":
		if !isBareWord(w) {
			// nft.Ifname prints bare: "" or "a b" would not read back.
			return nil, fmt.Errorf("unsupported %s value %q", t, w)
		}
		if name, ok := strings.CutSuffix(w, "*"); ok {
			return nft.Ifname{Name: name, Wildcard: true}, nil
		}
		return nft.Ifname{Name: w}, nil
	case "fib_addrtype":
		if ft, ok := nft.FibTypeNamed(w); ok {
			return ft, nil
		}
	}
	return nil, fmt.Errorf("unsupported %s value %q", t, w)
}

func parseU32(w string) (uint32, error) {
	n, err := strconv.ParseUint(w, 0, 32)
	if err != nil {
		return 0, fmt.Errorf("bad number %q", w)
	}
	return uint32(n), nil
}

func lowerVMap(v VMap) (nft.Stmt, error) {
	keys, err := lowerKeys(v.Key)
	if err != nil {
		return nil, err
	}
	out := nft.VMap{Keys: keys, Map: v.Name}
	if v.Name != "" {
		return out, nil
	}
	out.Elems = make([]nft.VMapElem, len(v.Elems))
	for i, e := range v.Elems {
		verdict, err := e.Verdict.Lower()
		if err != nil {
			return nil, err
		}
		out.Elems[i].Verdict = verdict
		if len(keys) == 1 && v.Key[0].Type == "integer" {
			if out.Elems[i].Key, err = parseU32(e.Key[0]); err != nil {
				return nil, err
			}
			continue
		}
		out.Elems[i].Fields = make([]nft.Value, len(e.Key))
		for j, w := range e.Key {
			if out.Elems[i].Fields[j], err = lowerValue(v.Key[j].Type, w); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func lowerMarkSet(m MarkSet) (nft.Stmt, error) {
	if m.From == nil {
		return nft.MarkSet{Op: nft.BitSet, Value: m.Value}, nil
	}
	if len(m.From.Ops) != 1 {
		return nil, fmt.Errorf("mark set from %d operations is not supported", len(m.From.Ops))
	}
	ops := map[byte]nft.BitOp{'|': nft.BitOr, '^': nft.BitXor, '&': nft.BitAnd}
	return nft.MarkSet{Op: ops[m.From.Ops[0].Op], Value: m.From.Ops[0].Value}, nil
}

func lowerNAT(n NAT, f nft.Family) (nft.Stmt, error) {
	family := "ip"
	if f == nft.IPv6 {
		family = "ip6"
	}
	if n.Family != "" && n.Family != family {
		return nil, fmt.Errorf("%s nat in a %s table", n.Family, family)
	}
	if len(n.Flags) != 0 {
		return nil, fmt.Errorf("%s flags are not supported", n.Kind)
	}
	if n.Map == nil {
		if n.AddrPort || len(n.To) != 1 {
			return nil, fmt.Errorf("%s to %s is not supported", n.Kind, strings.Join(n.To, " . "))
		}
		t, err := ParseNATTarget(n.To, family)
		if err != nil {
			return nil, err
		}
		to := netip.AddrPortFrom(t.Addr, t.Port)
		if n.Kind == "snat" {
			return nft.SNAT{To: to, NoPort: !t.HasPort}, nil
		}
		return nft.DNAT{To: to, NoPort: !t.HasPort}, nil
	}
	if n.Kind != "dnat" || !n.AddrPort {
		return nil, fmt.Errorf("%s to a map is only supported as dnat addr . port", n.Kind)
	}
	keys, err := lowerKeys(n.Map.Key)
	if err != nil {
		return nil, err
	}
	out := nft.DNATMap{Family: f, Keys: keys, Map: n.Map.Name}
	if n.Map.Name != "" {
		return out, nil
	}
	if len(keys) != 1 || n.Map.Key[0].Type != "integer" {
		return nil, fmt.Errorf("anonymous nat maps are only supported with numbers as keys")
	}
	out.Elems = make([]nft.DNATElem, len(n.Map.Elems))
	for i, e := range n.Map.Elems {
		if out.Elems[i].Key, err = parseU32(e.Key[0]); err != nil {
			return nil, err
		}
		if len(e.Data) != 2 {
			return nil, fmt.Errorf("nat map value %q is not addr . port", strings.Join(e.Data, " . "))
		}
		t, err := ParseNATTarget(e.Data, family)
		if err != nil {
			return nil, err
		}
		out.Elems[i].To = netip.AddrPortFrom(t.Addr, t.Port)
	}
	return out, nil
}
