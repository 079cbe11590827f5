package ipttrace

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/trace"
)

// dimKind is what one dimension of a set type holds.
type dimKind int

const (
	dimIP   dimKind = iota // an address
	dimNet                 // a network (an address without length is a host)
	dimPort                // protocol:port ("tcp:80"; a bare port is TCP)
	dimBare                // bitmap:port: a port, TCP or UDP
)

// setTypes are the set types modelled (those kube-proxy's ipvs mode creates, and
// hash:net), by their dimensions.
var setTypes = map[ipset.Type][]dimKind{
	ipset.HashIP:        {dimIP},
	ipset.HashIPPort:    {dimIP, dimPort},
	ipset.HashIPPortIP:  {dimIP, dimPort, dimIP},
	ipset.HashIPPortNet: {dimIP, dimPort, dimNet},
	"hash:net":          {dimNet},
	ipset.BitmapPort:    {dimBare},
}

// portProtos are the protocols of a "proto:port" entry part modelled (those with
// ports; ICMP type and code entries are not).
var portProtos = map[string]uint8{"tcp": 6, "udp": 17, "sctp": 132, "udplite": 136}

// ipSet is a set given to the tracer, its entries parsed.
type ipSet struct {
	name   string
	typ    ipset.Type
	dims   []dimKind
	family v1.IPFamily // "" for bitmap:port
	elems  []setElem
}

// setElem is one entry: one value per dimension.
type setElem []dimValue

type dimValue struct {
	prefix netip.Prefix // dimIP (a host prefix), dimNet
	proto  uint8        // dimPort
	port   uint16       // dimPort, dimBare
}

// WithSets returns a copy of the Tracer that evaluates "-m set" against sets (as
// `ipset save` lists them). An entry of a type not modelled, or with an option
// that changes its meaning (nomatch), is an error naming it; timeouts, counters
// and comments do not change membership. A rule matching a set not given fails
// the trace, naming the set.
func (t *Tracer) WithSets(sets []ipset.SavedSet) (*Tracer, error) {
	c := *t
	c.sets = maps.Clone(t.sets)
	if c.sets == nil {
		c.sets = map[string]*ipSet{}
	}
	for i := range sets {
		s, err := parseSet(&sets[i])
		if err != nil {
			return nil, fmt.Errorf("set %s: %w", sets[i].Set.Name, err)
		}
		c.sets[s.name] = s
	}
	return &c, nil
}

func parseSet(ss *ipset.SavedSet) (*ipSet, error) {
	dims, ok := setTypes[ss.Set.Type]
	if !ok {
		return nil, fmt.Errorf("type %q is not modelled", ss.Set.Type)
	}
	s := &ipSet{name: ss.Set.Name, typ: ss.Set.Type, dims: dims, family: ss.Set.Family}
	if ss.Set.Type == ipset.BitmapPort {
		s.family = ""
	} else if s.family == "" {
		s.family = v1.IPv4Protocol
	}
	for _, e := range ss.Entries {
		for _, opt := range strings.Fields(ss.Options[e]) {
			if opt == "nomatch" {
				return nil, fmt.Errorf("entry %q: nomatch is not modelled", e)
			}
		}
		el, err := s.parseEntry(e)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", e, err)
		}
		s.elems = append(s.elems, el)
	}
	return s, nil
}

func (s *ipSet) parseEntry(e string) (setElem, error) {
	parts := strings.Split(e, ",")
	if len(parts) != len(s.dims) {
		return nil, fmt.Errorf("%s wants %d comma-separated parts", s.typ, len(s.dims))
	}
	el := make(setElem, len(parts))
	for i, p := range parts {
		var err error
		switch s.dims[i] {
		case dimIP, dimNet:
			el[i].prefix, err = parseSetAddr(p, s.dims[i] == dimNet, s.family == v1.IPv6Protocol)
		case dimPort:
			el[i].proto, el[i].port, err = parseSetPort(p)
		case dimBare:
			var n uint64
			n, err = strconv.ParseUint(p, 10, 16)
			el[i].port = uint16(n)
		}
		if err != nil {
			return nil, err
		}
	}
	return el, nil
}

func parseSetAddr(s string, isNet, v6 bool) (netip.Prefix, error) {
	var p netip.Prefix
	if isNet && strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return p, err
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return p, err
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Is6() != v6 {
		return p, fmt.Errorf("address %s is not of the set's family", s)
	}
	return p.Masked(), nil
}

// parseSetPort reads "proto:port" as ipset save prints it ("tcp:80"), or a bare
// port (TCP, as ipset reads it).
func parseSetPort(s string) (uint8, uint16, error) {
	name, port, ok := strings.Cut(s, ":")
	if !ok {
		name, port = "tcp", s
	}
	proto, known := portProtos[name]
	if !known {
		return 0, 0, fmt.Errorf("protocol %q is not modelled", name)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return 0, 0, fmt.Errorf("bad port %q: %w", port, err)
	}
	return proto, uint16(n), nil
}

// setMatch is "[!] --match-set NAME FLAGS" of -m set.
type setMatch struct {
	name string
	src  []bool // per dimension: the packet's source (else destination)
	neg  bool
}

func buildSet(_ *ruleParser, opts []option) (matcher, error) {
	if len(opts) != 1 || opts[0].name != "--match-set" {
		return nil, errors.New("needs exactly one --match-set (its other options are not modelled)")
	}
	o := opts[0]
	m := setMatch{name: o.vals[0], neg: o.neg}
	for _, f := range strings.Split(o.vals[1], ",") {
		switch f {
		case "src", "dst":
			m.src = append(m.src, f == "src")
		default:
			return nil, fmt.Errorf("--match-set %s: bad flag %q", m.name, f)
		}
	}
	if len(m.src) > 6 { // IPSET_DIM_MAX
		return nil, fmt.Errorf("--match-set %s: more than 6 flags", m.name)
	}
	return m, nil
}

// match tests the packet against the set as the kernel's ip_set_test does: a
// set of the other family, or of more dimensions than the rule's flags, never
// matches; bitmap:port sees only TCP and UDP ports; a hash type with a port
// compares the protocol too.
func (m setMatch) match(r *run) (bool, error) {
	s := r.tr.sets[m.name]
	if s == nil {
		return false, fmt.Errorf("set %s was not given to the tracer", m.name)
	}
	ok := s.test(r, m.src)
	if ok {
		r.pending = append(r.pending, fmt.Sprintf("    set %s holds the packet", m.name))
	}
	return ok != m.neg, nil
}

func (s *ipSet) test(r *run, src []bool) bool {
	if len(src) < len(s.dims) {
		return false
	}
	if s.family != "" && (s.family == v1.IPv6Protocol) != r.tr.v6 {
		return false
	}
	key := make([]dimValue, len(s.dims))
	for i, d := range s.dims {
		addr, port := r.pkt.dst, r.pkt.dport
		if src[i] {
			addr, port = r.pkt.src, r.pkt.sport
		}
		switch d {
		case dimIP, dimNet:
			key[i].prefix = netip.PrefixFrom(addr, addr.BitLen())
		case dimPort:
			key[i].proto = r.pkt.proto
			if trace.HasPorts(r.pkt.proto) {
				key[i].port = port
			}
		case dimBare:
			if r.pkt.proto != 6 && r.pkt.proto != 17 {
				return false
			}
			key[i].port = port
		}
	}
	for _, el := range s.elems {
		if el.holds(s.dims, key) {
			return true
		}
	}
	return false
}

func (el setElem) holds(dims []dimKind, key []dimValue) bool {
	for i, d := range dims {
		switch d {
		case dimIP:
			if el[i].prefix != key[i].prefix {
				return false
			}
		case dimNet:
			if !el[i].prefix.Contains(key[i].prefix.Addr()) {
				return false
			}
		case dimPort:
			if el[i].proto != key[i].proto || el[i].port != key[i].port {
				return false
			}
		case dimBare:
			if el[i].port != key[i].port {
				return false
			}
		}
	}
	return true
}
