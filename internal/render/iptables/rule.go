package iptables

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"

	ipt "github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/model"
)

// Rule builds one rule's text exactly as iptables-save prints it (after "-A CHAIN"),
// whatever order the parts are given in: the address part (-s, -d, -i, -p) first,
// then the matches in the order they were added, then the target. Writing rules in
// that canonical form makes "-D CHAIN <rule>" match what the kernel holds and makes
// a restore followed by iptables-save give back the same text (checked by the kernel
// test with both iptables backends). The ipvs renderer (internal/render/ipvs) writes
// its rules with it too.
type Rule struct {
	src, dst, in, proto string
	matches             []string
	target              string
}

// NewRule starts an empty rule (no match, no target).
func NewRule() *Rule { return &Rule{} }

func negation(negate bool) string {
	if negate {
		return "! "
	}
	return ""
}

// Source matches a source address or prefix.
func (r *Rule) Source(s string, negate bool) *Rule {
	r.src = negation(negate) + "-s " + s
	return r
}

// Dest matches a destination address or prefix.
func (r *Rule) Dest(s string, negate bool) *Rule {
	r.dst = negation(negate) + "-d " + s
	return r
}

// InInterface matches the input interface ("name" or "prefix+").
func (r *Rule) InInterface(name string, negate bool) *Rule {
	r.in = negation(negate) + "-i " + name
	return r
}

// Protocol matches the L4 protocol (lower case).
func (r *Rule) Protocol(proto string) *Rule {
	r.proto = "-p " + proto
	return r
}

// Match adds a match module with its options, e.g. Match("conntrack", "--ctstate", "NEW").
func (r *Rule) Match(parts ...string) *Rule {
	r.matches = append(r.matches, "-m "+strings.Join(parts, " "))
	return r
}

// Comment adds "-m comment --comment TEXT", quoted as iptables-save quotes it.
func (r *Rule) Comment(text string) *Rule {
	return r.Match("comment", "--comment", ipt.SaveString(text))
}

// DPort matches the destination port through the protocol's match module, as
// upstream writes it ("-m tcp -p tcp --dport N" saves as "-p tcp ... -m tcp --dport N").
func (r *Rule) DPort(proto string, port int32) *Rule {
	r.Protocol(proto)
	return r.Match(proto, "--dport", strconv.Itoa(int(port)))
}

// Jump sets the target ("-j TARGET [options]").
func (r *Rule) Jump(target string, options ...string) *Rule {
	r.target = "-j " + target
	if len(options) > 0 {
		r.target += " " + strings.Join(options, " ")
	}
	return r
}

// String is the rule's text after "-A CHAIN ", as iptables-save prints it.
func (r *Rule) String() string {
	var b strings.Builder
	for _, part := range []string{r.src, r.dst, r.in, r.proto} {
		if part != "" {
			b.WriteString(part)
			b.WriteByte(' ')
		}
	}
	for _, m := range r.matches {
		b.WriteString(m)
		b.WriteByte(' ')
	}
	if r.target != "" {
		b.WriteString(r.target)
	}
	return strings.TrimSuffix(b.String(), " ")
}

// MatchLocal adds to r the match of traffic from a local pod (negate: not from a
// local pod) as d detects it; nothing when d is not implemented. d must be valid.
func (r *Rule) MatchLocal(d *model.LocalDetector, negate bool) *Rule {
	switch d.Mode {
	case model.DetectClusterCIDR, model.DetectNodeCIDR:
		// The first CIDR only, as upstream (see model.LocalDetector).
		r.Source(d.CIDRs[0].Masked().String(), negate)
	case model.DetectBridgeInterface:
		r.InInterface(d.BridgeInterface, negate)
	case model.DetectInterfaceNamePrefix:
		r.InInterface(d.InterfaceNamePrefix+"+", negate)
	}
	return r
}

// MasqueradeMark is the packet mark of masquerade bit bit as iptables-save prints
// it ("0x4000" for upstream's default bit 14).
func MasqueradeMark(bit int32) string {
	return fmt.Sprintf("%#x", uint32(1)<<uint(bit))
}

// HostPrefix renders an address as iptables-save does: with its full prefix length.
func HostPrefix(ip netip.Addr) string {
	return netip.PrefixFrom(ip, ip.BitLen()).String()
}

// probability is the "--probability" value of the rule matching 1 in n, as
// iptables-save prints it. Upstream writes 1/n with 10 decimals; libxt_statistic
// stores round(p * 2^31) and prints that back divided by 2^31 with 11 decimals
// (1/3 comes back as 0.33333333349).
func probability(n int) string {
	written, _ := strconv.ParseFloat(fmt.Sprintf("%0.10f", 1.0/float64(n)), 64)
	stored := math.Round(written * 0x80000000)
	return fmt.Sprintf("%.11f", stored/0x80000000)
}
