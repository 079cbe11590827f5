package trace

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Verdict is the final fate of a traced packet.
type Verdict string

const (
	// Accept means no chain dropped or rejected the packet.
	Accept Verdict = "ACCEPT"
	// Drop means a drop verdict (or a base chain's drop policy) ended the trace.
	Drop Verdict = "DROP"
	// Reject means a reject statement ended the trace.
	Reject Verdict = "REJECT"
)

// Packet describes the packet to trace. Only the fields a rule looks at matter.
type Packet struct {
	// SourceIP and DestIP are IPv4 or IPv6 addresses (both of the same family).
	SourceIP string
	DestIP   string
	// Protocol is the lowercase L4 protocol: "tcp" (default when empty), "udp",
	// "sctp", "icmp", "icmpv6", ...
	Protocol string
	// SourcePort and DestPort are the L4 ports (ignored for port-less protocols).
	SourcePort int
	DestPort   int
	// InputInterface is the interface the packet arrived on ("" when locally
	// generated; traversal of the loopback re-entry uses "lo").
	InputInterface string
	// OutputInterface is the interface the packet leaves by, as seen by oifname
	// matches in forward/output/postrouting ("lo" is used when the destination is
	// local and the packet is locally generated, unless set).
	OutputInterface string
	// LocallyGenerated selects the output path instead of the prerouting path.
	LocallyGenerated bool
	// Mark is the initial packet mark.
	Mark uint32
	// CTState is the conntrack state: "new" (default when empty), "established",
	// "related", "invalid" or "untracked". nat chains only run for "new".
	CTState string
}

// Outcome is one possible path of a packet. There is more than one only when a rule
// makes a random choice (numgen, -m statistic).
type Outcome struct {
	// Verdict is the final verdict of this path.
	Verdict Verdict
	// DNAT is the destination-NAT target "ip:port" ("[ip6]:port"), or just "ip" if the
	// rule gave no port; "" when the packet was not DNATed.
	DNAT string
	// SNAT is the source-NAT target in the same format; "" when none.
	SNAT string
	// Masquerade says whether a masquerade statement was executed.
	Masquerade bool
	// Mark is the packet mark at the end of the trace.
	Mark uint32
	// Probability is the chance that a packet takes this path: the product of the
	// probabilities of the random choices made on it (1/N for each of N numgen
	// alternatives, P or 1-P for an iptables statistic match), 1 when none was
	// made. The Outcomes of a Result add up to 1.
	Probability float64
	// Trace lists the base chains entered and the rules that fully matched (and so
	// executed their statements), in order, for failure messages.
	Trace []string
}

// Result aggregates all possible Outcomes of a traced packet.
type Result struct {
	// Verdict is the verdict shared by all outcomes; if outcomes disagree it is their
	// sorted distinct verdicts joined by "," (e.g. "ACCEPT,DROP"), which never
	// equals one of the constants, so tests notice.
	Verdict Verdict
	// DNATTargets are the distinct DNAT targets of all outcomes, sorted (empty when
	// nothing was DNATed).
	DNATTargets []string
	// Masquerade is true if any outcome was masqueraded.
	Masquerade bool
	// Outcomes holds every explored path, in exploration order.
	Outcomes []Outcome
	// Trace is the traces of all outcomes, each prefixed by a "--- path N" header when
	// there is more than one outcome.
	Trace []string
}

// Evaluator traces packets through one ruleset: what every evaluator
// (nfttrace, ipttrace) offers to kube-proxy trace.
type Evaluator interface {
	Trace(p Packet) (*Result, error)
}

// Output renders the result the way upstream kube-proxy's packet-flow tests spell
// their expectations: the verdict if it is not ACCEPT, else the DNAT targets joined by
// ", " if any, else "ACCEPT".
func (r *Result) Output() string {
	if r.Verdict != Accept {
		return string(r.Verdict)
	}
	if len(r.DNATTargets) > 0 {
		return strings.Join(r.DNATTargets, ", ")
	}
	return string(Accept)
}

// TraceString is Trace joined by newlines, for failure messages.
func (r *Result) TraceString() string {
	return strings.Join(r.Trace, "\n")
}

// Aggregate is the Result of outcomes, the explored paths of one packet.
func Aggregate(outcomes []Outcome) *Result {
	r := &Result{Outcomes: outcomes}
	verdicts := map[Verdict]bool{}
	dnats := map[string]bool{}
	for i, o := range outcomes {
		verdicts[o.Verdict] = true
		if o.DNAT != "" {
			dnats[o.DNAT] = true
		}
		if o.Masquerade {
			r.Masquerade = true
		}
		if len(outcomes) > 1 {
			r.Trace = append(r.Trace, "--- path "+strconv.Itoa(i+1))
		}
		r.Trace = append(r.Trace, o.Trace...)
	}
	var vs []string
	for v := range verdicts {
		vs = append(vs, string(v))
	}
	sort.Strings(vs)
	r.Verdict = Verdict(strings.Join(vs, ","))
	for d := range dnats {
		r.DNATTargets = append(r.DNATTargets, d)
	}
	sort.Strings(r.DNATTargets)
	return r
}

// Check reports what is inconsistent in r: a result without outcomes, or outcomes
// whose probabilities do not add up to 1 (every traced packet takes exactly one of
// the explored paths). The tracers' fuzz targets hold every result to it.
func (r *Result) Check() error {
	if len(r.Outcomes) == 0 {
		return errors.New("a result without outcomes")
	}
	sum := 0.0
	for _, o := range r.Outcomes {
		sum += o.Probability
	}
	if math.Abs(sum-1) > 1e-6 {
		return fmt.Errorf("the outcomes' probabilities add up to %v", sum)
	}
	return nil
}
