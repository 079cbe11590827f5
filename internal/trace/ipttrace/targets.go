package ipttrace

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

type targetKind int

const (
	tNone targetKind = iota // no -j: the rule only counts
	tAccept
	tDrop
	tReject
	tReturn
	tJump // a user chain, -j or -g
	tDNAT
	tSNAT
	tMasquerade
	tMark
	tNotrack // -j NOTRACK, -j CT --notrack
	tNoop    // LOG, NFLOG, TRACE, CT without --notrack
)

// target is a rule's parsed "-j"/"-g" part.
type target struct {
	kind  targetKind
	name  string // as written
	chain string // tJump
	goTo  bool   // -g: the chain does not come back
	// tDNAT, tSNAT
	addr    netip.Addr
	port    uint16
	hasPort bool
	// tMark: mark = (mark & and) ^ xor (how the kernel's MARK target is written)
	and, xor uint32
}

// targetSpec is a supported target: its options with their number of values, the
// tables it may be used in (nil: any) and how its options are read.
type targetSpec struct {
	kind   targetKind
	opts   map[string]int
	tables []string
	build  func(p *ruleParser, t *target, opts []option) error
}

var targetSpecs = map[string]*targetSpec{
	"ACCEPT": {kind: tAccept},
	"DROP":   {kind: tDrop},
	"RETURN": {kind: tReturn},
	"REJECT": {kind: tReject, opts: map[string]int{"--reject-with": 1}},
	"DNAT": {
		kind: tDNAT, opts: map[string]int{"--to-destination": 1, "--random": 0, "--persistent": 0},
		tables: []string{"nat"}, build: buildNAT("--to-destination"),
	},
	"SNAT": {
		kind: tSNAT, opts: map[string]int{"--to-source": 1, "--random": 0, "--random-fully": 0, "--persistent": 0},
		tables: []string{"nat"}, build: buildNAT("--to-source"),
	},
	"MASQUERADE": {
		kind: tMasquerade, opts: map[string]int{"--to-ports": 1, "--random": 0, "--random-fully": 0},
		tables: []string{"nat"},
	},
	"MARK": {
		kind: tMark, build: buildMarkTarget,
		opts: map[string]int{"--set-xmark": 1, "--set-mark": 1, "--and-mark": 1, "--or-mark": 1, "--xor-mark": 1},
	},
	"LOG": {kind: tNoop, opts: map[string]int{
		"--log-prefix": 1, "--log-level": 1, "--log-tcp-sequence": 0, "--log-tcp-options": 0,
		"--log-ip-options": 0, "--log-uid": 0, "--log-macdecode": 0,
	}},
	"NFLOG": {kind: tNoop, opts: map[string]int{
		"--nflog-group": 1, "--nflog-prefix": 1, "--nflog-range": 1, "--nflog-size": 1, "--nflog-threshold": 1,
	}},
	"TRACE":   {kind: tNoop, tables: []string{"raw"}},
	"NOTRACK": {kind: tNotrack, tables: []string{"raw"}},
	"CT": {
		kind: tNoop, tables: []string{"raw"}, build: buildCT,
		opts: map[string]int{
			"--notrack": 0, "--zone": 1, "--zone-orig": 1, "--zone-reply": 1, "--helper": 1,
			"--ctevents": 1, "--expevents": 1, "--timeout": 1,
		},
	},
}

func (p *ruleParser) buildTarget() (target, error) {
	t := target{name: p.tgtName}
	spec, ok := targetSpecs[p.tgtName]
	if !ok {
		// Not a standard or extension target: a user chain of the table, checked
		// once every chain is known.
		if len(p.tgtOpts) > 0 {
			return t, errors.New("options after a chain name")
		}
		t.kind, t.chain, t.goTo = tJump, p.tgtName, p.tgtGoto
		return t, nil
	}
	if p.tgtGoto {
		return t, errors.New("-g needs a chain")
	}
	if spec.tables != nil && !slices.Contains(spec.tables, p.table) {
		return t, fmt.Errorf("only valid in table %s", strings.Join(spec.tables, ", "))
	}
	t.kind = spec.kind
	if spec.build != nil {
		if err := spec.build(p, &t, p.tgtOpts); err != nil {
			return t, err
		}
	}
	return t, nil
}

// buildNAT reads "--to-destination|--to-source ADDR[:PORT]" ("[V6]:PORT" or a bare
// IPv6 address). Address and port ranges are not modelled.
func buildNAT(opt string) func(p *ruleParser, t *target, opts []option) error {
	return func(p *ruleParser, t *target, opts []option) error {
		var to string
		for _, o := range opts {
			if o.name == opt {
				if to != "" {
					return fmt.Errorf("more than one %s", opt)
				}
				to = o.vals[0]
			}
		}
		if to == "" {
			return fmt.Errorf("needs %s", opt)
		}
		addr, port, hasPort, err := parseNATTarget(to, p.v6)
		if err != nil {
			return fmt.Errorf("%s %s: %w", opt, to, err)
		}
		t.addr, t.port, t.hasPort = addr, port, hasPort
		return nil
	}
}

func parseNATTarget(s string, v6 bool) (netip.Addr, uint16, bool, error) {
	if strings.Contains(s, "-") {
		return netip.Addr{}, 0, false, errors.New("ranges are not supported")
	}
	host, port := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.Index(s, "]")
		if end < 0 {
			return netip.Addr{}, 0, false, errors.New("missing ]")
		}
		host, port = s[1:end], strings.TrimPrefix(s[end+1:], ":")
		if port == "" && end+1 < len(s) {
			return netip.Addr{}, 0, false, errors.New("bad port")
		}
	case !v6:
		host, port, _ = strings.Cut(s, ":")
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, 0, false, fmt.Errorf("bad address: %w", err)
	}
	if a.Is6() != v6 {
		return netip.Addr{}, 0, false, fmt.Errorf("not %s", familyName(v6))
	}
	if port == "" {
		return a, 0, false, nil
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.Addr{}, 0, false, fmt.Errorf("bad port: %w", err)
	}
	return a, uint16(n), true, nil
}

// buildMarkTarget turns every spelling of MARK into mark = (mark & and) ^ xor, as
// the kernel's xt_MARK does (--set-mark V/M is --set-xmark V/(M|V)).
func buildMarkTarget(_ *ruleParser, t *target, opts []option) error {
	if len(opts) != 1 {
		return errors.New("needs exactly one of --set-xmark, --set-mark, --and-mark, --or-mark, --xor-mark")
	}
	o := opts[0]
	v, m, err := parseMark(o.vals[0])
	if err != nil {
		return fmt.Errorf("%s: %w", o.name, err)
	}
	hasMask := strings.Contains(o.vals[0], "/")
	switch o.name {
	case "--set-xmark":
		t.and, t.xor = ^m, v
	case "--set-mark":
		t.and, t.xor = ^(m | v), v
	case "--and-mark", "--or-mark", "--xor-mark":
		if hasMask {
			return fmt.Errorf("%s takes no mask", o.name)
		}
		switch o.name {
		case "--and-mark":
			t.and, t.xor = v, 0
		case "--or-mark":
			t.and, t.xor = ^v, v
		default:
			t.and, t.xor = ^uint32(0), v
		}
	}
	return nil
}

// buildCT: "-j CT --notrack" makes the packet untracked; the other options (zones,
// helpers, events, timeouts) change nothing the tracer models.
func buildCT(_ *ruleParser, t *target, opts []option) error {
	for _, o := range opts {
		if o.name == "--notrack" {
			t.kind = tNotrack
		}
	}
	return nil
}
