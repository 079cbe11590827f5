package ipttrace

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/kproxy/kproxy/internal/trace"
)

// rule is one parsed "-A CHAIN ..." line.
type rule struct {
	chain string
	line  int    // line of the iptables-save input
	text  string // as printed after "-A CHAIN "
	// matches run in the kernel's order: the generic part (-s, -d, -i, -o, -p),
	// then the match modules in the order written. A rule matches when all do.
	matches []matcher
	target  target // kind tNone: a rule without target (only counts)
}

// matcher is one condition of a rule.
type matcher interface {
	match(r *run) (bool, error)
}

// option is one "[!] --name [values...]" of a match module or target.
type option struct {
	name string
	neg  bool
	vals []string
}

// optionAliases are the long spellings of options, mapped to the short ones
// iptables-save prints.
var optionAliases = map[string]string{
	"--destination-port": "--dport", "--source-port": "--sport",
	"--destination-ports": "--dports", "--source-ports": "--sports",
}

// ruleParser holds what parsing one rule needs.
type ruleParser struct {
	v6    bool
	table string
	args  []string
	i     int

	rule     *rule
	proto    uint8 // the rule's -p (0: any)
	protoNeg bool
	mods     []*parsedModule
	tgtName  string
	tgtGoto  bool
	tgtOpts  []option
}

// parsedModule is a "-m NAME" and the options that followed it.
type parsedModule struct {
	name string
	spec *moduleSpec
	opts []option
}

// parseRule parses the arguments of one rule (after "-A CHAIN").
func parseRule(v6 bool, table, chain string, line int, text string, args []string) (*rule, error) {
	p := &ruleParser{v6: v6, table: table, args: args, rule: &rule{chain: chain, line: line, text: text}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	for _, m := range p.mods {
		mt, err := m.spec.build(p, m.opts)
		if err != nil {
			return nil, fmt.Errorf("-m %s: %w", m.name, err)
		}
		if mt != nil {
			p.rule.matches = append(p.rule.matches, mt)
		}
	}
	if p.tgtName != "" {
		t, err := p.buildTarget()
		if err != nil {
			return nil, fmt.Errorf("-j %s: %w", p.tgtName, err)
		}
		p.rule.target = t
	}
	return p.rule, nil
}

func (p *ruleParser) next() (string, bool) {
	if p.i >= len(p.args) {
		return "", false
	}
	a := p.args[p.i]
	p.i++
	return a, true
}

func (p *ruleParser) value(opt string) (string, error) {
	v, ok := p.next()
	if !ok {
		return "", fmt.Errorf("%s needs a value", opt)
	}
	return v, nil
}

func (p *ruleParser) parse() error {
	inTarget := false
	var cur *parsedModule
	for {
		a, ok := p.next()
		if !ok {
			return nil
		}
		neg := false
		if a == "!" {
			neg = true
			if a, ok = p.next(); !ok {
				return fmt.Errorf(`"!" at the end of the rule`)
			}
		}
		switch a {
		case "-s", "--source", "--src", "-d", "--destination", "--dst":
			v, err := p.value(a)
			if err != nil {
				return err
			}
			m, err := p.addrMatch(a == "-d" || a == "--destination" || a == "--dst", v, neg)
			if err != nil {
				return err
			}
			p.rule.matches = append(p.rule.matches, m)
		case "-i", "--in-interface", "-o", "--out-interface":
			v, err := p.value(a)
			if err != nil {
				return err
			}
			p.rule.matches = append(p.rule.matches, ifaceMatch{out: a == "-o" || a == "--out-interface", name: v, neg: neg})
		case "-p", "--protocol":
			v, err := p.value(a)
			if err != nil {
				return err
			}
			if err := p.protoMatch(v, neg); err != nil {
				return err
			}
		case "-m", "--match":
			if neg {
				return fmt.Errorf(`"!" before %s`, a)
			}
			v, err := p.value(a)
			if err != nil {
				return err
			}
			spec, ok := matchModules[v]
			if !ok {
				return fmt.Errorf("match module %q is not supported", v)
			}
			cur = &parsedModule{name: v, spec: spec}
			p.mods = append(p.mods, cur)
			inTarget = false
		case "-j", "--jump", "-g", "--goto":
			if neg || p.tgtName != "" {
				return fmt.Errorf("unexpected %s", a)
			}
			v, err := p.value(a)
			if err != nil {
				return err
			}
			p.tgtName, p.tgtGoto, inTarget = v, a == "-g" || a == "--goto", true
		case "-c", "--set-counters":
			if _, err := p.value(a); err != nil {
				return err
			}
			if _, err := p.value(a); err != nil {
				return err
			}
		default:
			if !strings.HasPrefix(a, "--") {
				return fmt.Errorf("unexpected argument %q", a)
			}
			name := a
			if alias, ok := optionAliases[a]; ok {
				name = alias
			}
			var err error
			if inTarget {
				err = p.targetOption(name, neg)
			} else {
				err = p.moduleOption(&cur, name, neg)
			}
			if err != nil {
				return err
			}
		}
	}
}

// moduleOption adds an option to the current match module, or to the protocol's
// implicit one ("-p tcp --dport 80" loads the tcp match, as iptables does).
func (p *ruleParser) moduleOption(cur **parsedModule, name string, neg bool) error {
	m := *cur
	if m == nil || !hasOpt(m.spec, name) {
		implicit := protoName(p.proto)
		spec := matchModules[implicit]
		if implicit == "" || p.protoNeg || (m != nil && m.name == implicit) || !hasOpt(spec, name) {
			if m == nil {
				return fmt.Errorf("option %s outside a match module", name)
			}
			return fmt.Errorf("-m %s: unknown option %s", m.name, name)
		}
		m = &parsedModule{name: implicit, spec: spec}
		p.mods = append(p.mods, m)
		*cur = m
	}
	o := option{name: name, neg: neg}
	for range m.spec.opts[name] {
		v, err := p.value(name)
		if err != nil {
			return err
		}
		o.vals = append(o.vals, v)
	}
	m.opts = append(m.opts, o)
	return nil
}

func hasOpt(spec *moduleSpec, name string) bool {
	_, ok := spec.opts[name]
	return ok
}

func (p *ruleParser) targetOption(name string, neg bool) error {
	spec, ok := targetSpecs[p.tgtName]
	if !ok {
		// A chain takes no options: this is an extension target not modelled.
		return fmt.Errorf("target %s is not supported", p.tgtName)
	}
	n, ok := spec.opts[name]
	if !ok {
		return fmt.Errorf("-j %s: unknown option %s", p.tgtName, name)
	}
	if neg {
		return fmt.Errorf(`-j %s: "!" before %s`, p.tgtName, name)
	}
	o := option{name: name}
	for range n {
		v, err := p.value(name)
		if err != nil {
			return err
		}
		o.vals = append(o.vals, v)
	}
	p.tgtOpts = append(p.tgtOpts, o)
	return nil
}

// addrMatch parses -s/-d: an address or prefix of the rules' family.
func (p *ruleParser) addrMatch(dst bool, v string, neg bool) (matcher, error) {
	var pfx netip.Prefix
	var err error
	if strings.Contains(v, "/") {
		pfx, err = netip.ParsePrefix(v)
	} else {
		var a netip.Addr
		a, err = netip.ParseAddr(v)
		pfx = netip.PrefixFrom(a, a.BitLen())
	}
	if err != nil {
		return nil, fmt.Errorf("bad address %q (only CIDR prefixes are supported): %w", v, err)
	}
	if pfx.Addr().Is6() != p.v6 {
		return nil, fmt.Errorf("address %s is not %s", v, familyName(p.v6))
	}
	return addrMatch{dst: dst, prefix: pfx.Masked(), neg: neg}, nil
}

func (p *ruleParser) protoMatch(v string, neg bool) error {
	if v == "all" || v == "0" {
		if neg {
			p.rule.matches = append(p.rule.matches, never{})
		}
		return nil
	}
	n, ok := trace.ProtocolNumber(v)
	if !ok {
		// iptables-save prints a number for a protocol /etc/protocols does not name.
		num, err := strconv.ParseUint(v, 10, 8)
		if err != nil {
			return fmt.Errorf("unknown protocol %q", v)
		}
		n = uint8(num)
	}
	p.proto, p.protoNeg = n, neg
	p.rule.matches = append(p.rule.matches, protoMatch{proto: n, neg: neg})
	return nil
}

// protoName is the match module of a protocol with ports.
func protoName(n uint8) string {
	switch n {
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 132:
		return "sctp"
	}
	return ""
}
