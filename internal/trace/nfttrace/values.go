package nfttrace

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/kproxy/kproxy/internal/nft/nfttext"
	"github.com/kproxy/kproxy/internal/trace"
)

// kind is the data type of a selector's value; it decides how literals compared
// against the selector are parsed.
type kind int

const (
	kindAddr4    kind = iota // ip saddr/daddr
	kindAddr6                // ip6 saddr/daddr
	kindProto                // meta l4proto, ip protocol, ip6 nexthdr
	kindPort                 // tcp/udp/sctp/th dport/sport
	kindMark                 // meta mark (and bitwise results on it)
	kindIfname               // iifname/oifname/iif/oif
	kindNfproto              // meta nfproto
	kindFibType              // fib saddr/daddr type
	kindCTState              // ct state
	kindCTStatus             // ct status (a flag set)
	kindInteger              // numgen
)

// kinds are the kinds of the selectors' types (nfttext.Selector.Type).
var kinds = map[string]kind{
	"ipv4_addr": kindAddr4, "ipv6_addr": kindAddr6, "inet_proto": kindProto, "inet_service": kindPort,
	"mark": kindMark, "ifname": kindIfname, "nf_proto": kindNfproto, "fib_addrtype": kindFibType,
	"ct_state": kindCTState, "ct_status": kindCTStatus, "integer": kindInteger,
}

// exprKinds returns the kind of each selector of e.
func exprKinds(e nfttext.Expr) ([]kind, error) {
	ks := make([]kind, len(e))
	for i, s := range e {
		k, ok := kinds[s.Type]
		if !ok {
			return nil, fmt.Errorf("internal error: unknown type %q of %s", s.Type, s.Name)
		}
		ks[i] = k
	}
	return ks, nil
}

func (k kind) String() string {
	return [...]string{"ipv4_addr", "ipv6_addr", "inet_proto", "inet_service", "mark",
		"ifname", "nf_proto", "fib_addrtype", "ct_state", "ct_status", "integer"}[k]
}

// value is the runtime value of a selector for the traced packet.
type value struct {
	kind  kind
	addr  netip.Addr
	num   uint64
	str   string
	flags map[string]bool // kindCTStatus
}

func (v value) String() string {
	switch v.kind {
	case kindAddr4, kindAddr6:
		return v.addr.String()
	case kindProto:
		if name, ok := trace.ProtocolName(uint8(v.num)); ok && v.num < 256 {
			return name
		}
		return strconv.FormatUint(v.num, 10)
	case kindMark:
		return fmt.Sprintf("0x%08x", v.num)
	case kindPort, kindInteger:
		return strconv.FormatUint(v.num, 10)
	case kindCTStatus:
		var fs []string
		for f := range v.flags {
			fs = append(fs, f)
		}
		return strings.Join(fs, ",")
	default:
		return v.str
	}
}

// pattern is a parsed literal (single value, prefix, range or wildcard) of some kind.
type pattern struct {
	kind     kind
	prefix   netip.Prefix // address prefix (a single address is a full-length prefix)
	addrLo   netip.Addr   // address range, when addrRange
	addrHi   netip.Addr
	isRange  bool
	lo, hi   uint64 // numeric value or range
	str      string
	wildcard bool // ifname "veth*"
}

func (p pattern) matches(v value) bool {
	switch p.kind {
	case kindAddr4, kindAddr6:
		if p.isRange {
			return v.addr.Compare(p.addrLo) >= 0 && v.addr.Compare(p.addrHi) <= 0
		}
		return p.prefix.Contains(v.addr)
	case kindProto, kindPort, kindMark, kindInteger:
		return v.num >= p.lo && v.num <= p.hi
	case kindIfname:
		if p.wildcard {
			return strings.HasPrefix(v.str, p.str)
		}
		return v.str == p.str
	case kindCTStatus:
		return v.flags[p.str]
	default:
		return v.str == p.str
	}
}

var ctStatusFlags = map[string]bool{
	"expected": true, "seen-reply": true, "assured": true, "confirmed": true,
	"snat": true, "dnat": true, "dying": true,
}

var fibTypes = map[string]bool{"local": true, "unicast": true, "multicast": true, "broadcast": true}

// parseLiteral parses one literal word as a pattern of kind k.
func parseLiteral(k kind, s string) (pattern, error) {
	p := pattern{kind: k}
	switch k {
	case kindAddr4, kindAddr6:
		if lo, hi, ok := strings.Cut(s, "-"); ok {
			a, err1 := parseAddr(k, lo)
			b, err2 := parseAddr(k, hi)
			if err1 != nil || err2 != nil || b.Less(a) {
				return p, fmt.Errorf("bad %s range %q", k, s)
			}
			p.isRange, p.addrLo, p.addrHi = true, a, b
			return p, nil
		}
		if strings.Contains(s, "/") {
			pfx, err := netip.ParsePrefix(s)
			if err != nil || (k == kindAddr4) != pfx.Addr().Is4() {
				return p, fmt.Errorf("bad %s prefix %q", k, s)
			}
			p.prefix = pfx.Masked()
			return p, nil
		}
		a, err := parseAddr(k, s)
		if err != nil {
			return p, err
		}
		p.prefix = netip.PrefixFrom(a, a.BitLen())
		return p, nil
	case kindProto, kindPort, kindMark, kindInteger:
		lo, hi, isRange := strings.Cut(s, "-")
		var err error
		if p.lo, err = parseNumber(k, lo); err != nil {
			return p, err
		}
		p.hi = p.lo
		if isRange {
			if p.hi, err = parseNumber(k, hi); err != nil || p.hi < p.lo {
				return p, fmt.Errorf("bad %s range %q", k, s)
			}
		}
		return p, nil
	case kindIfname:
		if strings.HasSuffix(s, "*") && !strings.HasSuffix(s, `\*`) {
			p.wildcard = true
			s = strings.TrimSuffix(s, "*")
		}
		p.str = s
		return p, nil
	case kindNfproto:
		if s != "ipv4" && s != "ipv6" {
			return p, fmt.Errorf("unknown nfproto %q", s)
		}
	case kindFibType:
		if !fibTypes[s] {
			return p, fmt.Errorf("unsupported fib address type %q", s)
		}
	case kindCTState:
		if !trace.IsCTState(s) {
			return p, fmt.Errorf("unknown ct state %q", s)
		}
	case kindCTStatus:
		if !ctStatusFlags[s] {
			return p, fmt.Errorf("unknown ct status %q", s)
		}
	}
	p.str = s
	return p, nil
}

func parseAddr(k kind, s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || (k == kindAddr4) != a.Is4() || a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("bad %s %q", k, s)
	}
	return a, nil
}

func parseNumber(k kind, s string) (uint64, error) {
	if k == kindProto {
		if n, ok := trace.ProtocolNumber(s); ok {
			return uint64(n), nil
		}
	}
	bits := 64
	switch k {
	case kindProto:
		bits = 8
	case kindPort:
		bits = 16
	case kindMark:
		bits = 32
	}
	n, err := strconv.ParseUint(s, 0, bits)
	if err != nil {
		return 0, fmt.Errorf("bad %s %q", k, s)
	}
	return n, nil
}
