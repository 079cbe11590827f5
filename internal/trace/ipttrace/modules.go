package ipttrace

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"

	"github.com/kproxy/kproxy/internal/trace"
)

// moduleSpec is a supported match module: its options with their number of
// values, and how they become a matcher (nil when the module never changes
// whether the rule matches, like comment).
type moduleSpec struct {
	opts  map[string]int
	build func(p *ruleParser, opts []option) (matcher, error)
}

// matchModules are the match modules understood; any other is an error naming the
// rule. Options not listed are errors too, so nothing is silently ignored.
var matchModules = map[string]*moduleSpec{
	"comment": {opts: map[string]int{"--comment": 1}, build: buildNothing},
	// nfacct only counts (kproxy's invalid-drop counter).
	"nfacct":    {opts: map[string]int{"--nfacct-name": 1}, build: buildNothing},
	"tcp":       {opts: map[string]int{"--dport": 1, "--sport": 1}, build: buildPorts("tcp")},
	"udp":       {opts: map[string]int{"--dport": 1, "--sport": 1}, build: buildPorts("udp")},
	"sctp":      {opts: map[string]int{"--dport": 1, "--sport": 1}, build: buildPorts("sctp")},
	"multiport": {opts: map[string]int{"--dports": 1, "--sports": 1, "--ports": 1}, build: buildMultiport},
	"addrtype": {
		opts:  map[string]int{"--src-type": 1, "--dst-type": 1, "--limit-iface-in": 0, "--limit-iface-out": 0},
		build: buildAddrtype,
	},
	"conntrack": {opts: map[string]int{"--ctstate": 1, "--ctstatus": 1}, build: buildConntrack},
	"state":     {opts: map[string]int{"--state": 1}, build: buildConntrack},
	"mark":      {opts: map[string]int{"--mark": 1}, build: buildMark},
	"statistic": {opts: map[string]int{"--mode": 1, "--probability": 1, "--every": 1, "--packet": 1}, build: buildStatistic},
	"recent": {
		opts: map[string]int{
			"--name": 1, "--set": 0, "--rcheck": 0, "--update": 0, "--remove": 0, "--seconds": 1,
			"--reap": 0, "--hitcount": 1, "--rttl": 0, "--mask": 1, "--rsource": 0, "--rdest": 0,
		},
		build: buildRecent,
	},
	"set": {opts: map[string]int{"--match-set": 2}, build: buildSet},
	"physdev": {
		opts:  map[string]int{"--physdev-in": 1, "--physdev-out": 1, "--physdev-is-in": 0, "--physdev-is-out": 0, "--physdev-is-bridged": 0},
		build: buildPhysdev,
	},
	"ipvs": {
		opts: map[string]int{
			"--ipvs": 0, "--vproto": 1, "--vaddr": 1, "--vport": 1, "--vdir": 1, "--vmethod": 1, "--vportctl": 1,
		},
		build: buildIPVS,
	},
}

func buildNothing(*ruleParser, []option) (matcher, error) { return nil, nil }

// all is the matcher that matches when every one of its parts does.
type all []matcher

func (a all) match(r *run) (bool, error) {
	for _, m := range a {
		ok, err := m.match(r)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// result returns the matcher of a module: nil for none, the one, or all of them.
func result(ms []matcher) matcher {
	switch len(ms) {
	case 0:
		return nil
	case 1:
		return ms[0]
	}
	return all(ms)
}

func noNegation(o option) error {
	if o.neg {
		return fmt.Errorf(`"!" before %s is not supported`, o.name)
	}
	return nil
}

// buildPorts is -m tcp|udp|sctp: the rule's -p must be that protocol (iptables
// refuses the rule otherwise), so at run time only the ports are compared.
func buildPorts(proto string) func(p *ruleParser, opts []option) (matcher, error) {
	return func(p *ruleParser, opts []option) (matcher, error) {
		if protoName(p.proto) != proto || p.protoNeg {
			return nil, fmt.Errorf("needs -p %s", proto)
		}
		var ms []matcher
		for _, o := range opts {
			lo, hi, err := parsePortRange(o.vals[0])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", o.name, err)
			}
			ms = append(ms, portMatch{dst: o.name == "--dport", ranges: [][2]uint16{{lo, hi}}, neg: o.neg})
		}
		return result(ms), nil
	}
}

func buildMultiport(p *ruleParser, opts []option) (matcher, error) {
	if !trace.HasPorts(p.proto) || p.protoNeg {
		return nil, errors.New("needs -p tcp, udp, sctp, dccp or udplite")
	}
	if len(opts) != 1 {
		return nil, errors.New("needs exactly one of --dports, --sports, --ports")
	}
	o := opts[0]
	var ranges [][2]uint16
	for _, s := range strings.Split(o.vals[0], ",") {
		lo, hi, err := parsePortRange(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.name, err)
		}
		ranges = append(ranges, [2]uint16{lo, hi})
	}
	switch o.name {
	case "--dports":
		return portMatch{dst: true, ranges: ranges, neg: o.neg}, nil
	case "--sports":
		return portMatch{ranges: ranges, neg: o.neg}, nil
	}
	return portMatch{either: true, ranges: ranges, neg: o.neg}, nil
}

// parsePortRange parses "N" or "N:M" (":M" and "N:" as iptables reads them).
func parsePortRange(s string) (uint16, uint16, error) {
	los, his, isRange := strings.Cut(s, ":")
	lo, hi := uint64(0), uint64(65535)
	var err error
	if los != "" {
		if lo, err = strconv.ParseUint(los, 10, 16); err != nil {
			return 0, 0, fmt.Errorf("bad port %q: %w", s, err)
		}
	}
	if !isRange {
		hi = lo
	} else if his != "" {
		if hi, err = strconv.ParseUint(his, 10, 16); err != nil {
			return 0, 0, fmt.Errorf("bad port %q: %w", s, err)
		}
	}
	if lo > hi {
		return 0, 0, fmt.Errorf("bad port range %q", s)
	}
	return uint16(lo), uint16(hi), nil
}

// addrTypes are the address types modelled: an address is LOCAL when it is one of
// the node's or loopback, else MULTICAST, BROADCAST (255.255.255.255 only) or UNICAST.
var addrTypes = map[string]bool{"LOCAL": true, "UNICAST": true, "MULTICAST": true, "BROADCAST": true}

func buildAddrtype(_ *ruleParser, opts []option) (matcher, error) {
	var ms []matcher
	for _, o := range opts {
		switch o.name {
		case "--limit-iface-in", "--limit-iface-out":
			// Which addresses sit on which interface is not part of the model.
			return nil, fmt.Errorf("%s is not supported", o.name)
		}
		types := map[string]bool{}
		for _, t := range strings.Split(o.vals[0], ",") {
			if !addrTypes[t] {
				return nil, fmt.Errorf("%s: address type %q is not supported", o.name, t)
			}
			types[t] = true
		}
		ms = append(ms, addrtypeMatch{dst: o.name == "--dst-type", types: types, neg: o.neg})
	}
	return result(ms), nil
}

// ctStateNames are conntrack's state names, with the virtual SNAT and DNAT states.
var ctStateNames = map[string]string{
	"NEW": "new", "ESTABLISHED": "established", "RELATED": "related", "INVALID": "invalid",
	"UNTRACKED": "untracked", "SNAT": "snat", "DNAT": "dnat",
}

// ctStatusNames are the conntrack status bits modelled (see ctstatusMatch).
var ctStatusNames = map[string]bool{"NONE": true, "EXPECTED": true, "SEEN_REPLY": true, "ASSURED": true, "CONFIRMED": true}

func buildConntrack(_ *ruleParser, opts []option) (matcher, error) {
	var ms []matcher
	for _, o := range opts {
		set := map[string]bool{}
		for _, s := range strings.Split(o.vals[0], ",") {
			if o.name == "--ctstatus" {
				if !ctStatusNames[s] {
					return nil, fmt.Errorf("%s: unknown status %q", o.name, s)
				}
				set[s] = true
				continue
			}
			st, ok := ctStateNames[s]
			if !ok || (o.name == "--state" && (st == "snat" || st == "dnat")) {
				return nil, fmt.Errorf("%s: unknown state %q", o.name, s)
			}
			set[st] = true
		}
		if o.name == "--ctstatus" {
			ms = append(ms, ctstatusMatch{statuses: set, neg: o.neg})
		} else {
			ms = append(ms, ctstateMatch{states: set, neg: o.neg})
		}
	}
	return result(ms), nil
}

func buildMark(_ *ruleParser, opts []option) (matcher, error) {
	var ms []matcher
	for _, o := range opts {
		v, m, err := parseMark(o.vals[0])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.name, err)
		}
		ms = append(ms, markMatch{value: v, mask: m, neg: o.neg})
	}
	return result(ms), nil
}

// parseMark parses "V" or "V/M" (hex or decimal); the mask defaults to all ones.
func parseMark(s string) (uint32, uint32, error) {
	vs, ms, hasMask := strings.Cut(s, "/")
	v, err := strconv.ParseUint(vs, 0, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("bad mark %q: %w", s, err)
	}
	m := uint64(math.MaxUint32)
	if hasMask {
		if m, err = strconv.ParseUint(ms, 0, 32); err != nil {
			return 0, 0, fmt.Errorf("bad mark mask %q: %w", s, err)
		}
	}
	return uint32(v), uint32(m), nil
}

func buildStatistic(_ *ruleParser, opts []option) (matcher, error) {
	var mode, prob string
	neg := false
	for _, o := range opts {
		switch o.name {
		case "--mode":
			if err := noNegation(o); err != nil {
				return nil, err
			}
			mode = o.vals[0]
		case "--probability":
			prob, neg = o.vals[0], o.neg
		default:
			return nil, fmt.Errorf("%s (mode nth) is not supported", o.name)
		}
	}
	if mode != "random" {
		return nil, fmt.Errorf("mode %q is not supported (only random)", mode)
	}
	f, err := strconv.ParseFloat(prob, 64)
	if err != nil || f < 0 || f > 1 {
		return nil, fmt.Errorf("bad --probability %q", prob)
	}
	return statisticMatch{p: f, neg: neg}, nil
}

func buildRecent(p *ruleParser, opts []option) (matcher, error) {
	m := recentMatch{name: "DEFAULT", bits: 128}
	if !p.v6 {
		m.bits = 32
	}
	for _, o := range opts {
		switch o.name {
		case "--set", "--rcheck", "--update", "--remove":
			if m.cmd != "" {
				return nil, fmt.Errorf("%s and %s together", m.cmd, o.name)
			}
			m.cmd, m.neg = o.name, o.neg
		case "--name":
			m.name = o.vals[0]
		case "--mask":
			a, err := netip.ParseAddr(o.vals[0])
			if err != nil || a.Is6() != p.v6 {
				return nil, fmt.Errorf("bad --mask %q", o.vals[0])
			}
			bits, err := maskBits(a)
			if err != nil {
				return nil, err
			}
			m.bits = bits
		case "--rsource":
			m.rdest = false
		case "--rdest":
			m.rdest = true
		case "--seconds", "--reap", "--rttl":
			// Every entry of a list given to the tracer counts as seen just now,
			// from this TTL: the time window never excludes one.
		case "--hitcount":
			return nil, errors.New("--hitcount is not supported")
		}
		if o.neg && o.name != m.cmd {
			return nil, fmt.Errorf(`"!" before %s is not supported`, o.name)
		}
	}
	if m.cmd == "" {
		return nil, errors.New("needs one of --set, --rcheck, --update, --remove")
	}
	return m, nil
}

// maskBits is the prefix length of a contiguous netmask.
func maskBits(a netip.Addr) (int, error) {
	b := a.AsSlice()
	bits := 0
	for i, x := range b {
		ones := 0
		for ones < 8 && x&(0x80>>ones) != 0 {
			ones++
		}
		bits += ones
		if ones < 8 {
			rest := append([]byte{x << ones}, b[i+1:]...)
			for _, y := range rest {
				if y != 0 {
					return 0, fmt.Errorf("netmask %s is not contiguous", a)
				}
			}
			break
		}
	}
	return bits, nil
}

func buildPhysdev(_ *ruleParser, opts []option) (matcher, error) {
	if len(opts) != 1 || opts[0].name != "--physdev-is-in" {
		return nil, errors.New("only --physdev-is-in, alone, is modelled")
	}
	return physdevMatch{neg: opts[0].neg}, nil
}

func buildIPVS(_ *ruleParser, opts []option) (matcher, error) {
	m := ipvsMatch{onlyProperty: true}
	for _, o := range opts {
		switch o.name {
		case "--ipvs":
			m.propertyNeg = o.neg
		case "--vproto":
			n, ok := trace.ProtocolNumber(o.vals[0])
			if !ok {
				num, err := strconv.ParseUint(o.vals[0], 10, 8)
				if err != nil {
					return nil, fmt.Errorf("--vproto: unknown protocol %q", o.vals[0])
				}
				n = uint8(num)
			}
			m.proto, m.hasProto, m.protoNeg, m.onlyProperty = n, true, o.neg, false
		default:
			m.onlyProperty = false
		}
	}
	return m, nil
}
