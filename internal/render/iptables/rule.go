package iptables

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"

	ipt "github.com/kproxy/kproxy/internal/iptables"
)

// rule builds one rule's text exactly as iptables-save prints it (after "-A CHAIN"),
// whatever order the parts are given in: the address part (-s, -d, -i, -p) first,
// then the matches in the order they were added, then the target. Writing rules in
// that canonical form makes "-D CHAIN <rule>" match what the kernel holds and makes
// a restore followed by iptables-save give back the same text (checked by the kernel
// test with both iptables backends).
type rule struct {
	src, dst, in, proto string
	matches             []string
	target              string
}

func newRule() *rule { return &rule{} }

func negation(negate bool) string {
	if negate {
		return "! "
	}
	return ""
}

// source matches a source address or prefix.
func (r *rule) source(s string, negate bool) *rule {
	r.src = negation(negate) + "-s " + s
	return r
}

// dest matches a destination address or prefix.
func (r *rule) dest(s string, negate bool) *rule {
	r.dst = negation(negate) + "-d " + s
	return r
}

// inInterface matches the input interface ("name" or "prefix+").
func (r *rule) inInterface(name string, negate bool) *rule {
	r.in = negation(negate) + "-i " + name
	return r
}

// protocol matches the L4 protocol (lower case).
func (r *rule) protocol(proto string) *rule {
	r.proto = "-p " + proto
	return r
}

// match adds a match module with its options, e.g. match("conntrack", "--ctstate", "NEW").
func (r *rule) match(parts ...string) *rule {
	r.matches = append(r.matches, "-m "+strings.Join(parts, " "))
	return r
}

// comment adds "-m comment --comment TEXT", quoted as iptables-save quotes it.
func (r *rule) comment(text string) *rule {
	return r.match("comment", "--comment", ipt.SaveString(text))
}

// dport matches the destination port through the protocol's match module, as
// upstream writes it ("-m tcp -p tcp --dport N" saves as "-p tcp ... -m tcp --dport N").
func (r *rule) dport(proto string, port int32) *rule {
	r.protocol(proto)
	return r.match(proto, "--dport", strconv.Itoa(int(port)))
}

// jump sets the target ("-j TARGET [options]").
func (r *rule) jump(target string, options ...string) *rule {
	r.target = "-j " + target
	if len(options) > 0 {
		r.target += " " + strings.Join(options, " ")
	}
	return r
}

func (r *rule) String() string {
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

// hostPrefix renders an address as iptables-save does: with its full prefix length.
func hostPrefix(ip netip.Addr) string {
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
