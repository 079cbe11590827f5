package inspect

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// PrintTrace writes t as a human-readable report: the packet, its path through
// the ruleset (the first path in full, the others from where they part from it),
// each outcome with its verdict, DNAT target, probability and masquerade, then
// the Service ports the destination is, with the reason each endpoint is or is
// not used.
func PrintTrace(w io.Writer, t *Trace) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := &t.Packet
	from := "generated on the node itself"
	if !p.LocallyGenerated {
		from = "arriving on " + p.InputInterface
	}
	fmt.Fprintf(tw, "Packet %s %s -> %s (%s), %s, ct state %s\n", strings.ToUpper(p.Protocol), p.Source, p.Destination, p.Family, from, p.CTState)
	fmt.Fprintf(tw, "Node %s, mode %s, ruleset read from the kernel: %s\n", t.NodeName, t.Mode, t.Ruleset)
	fmt.Fprintf(tw, "Verdict: %s\n", describeVerdict(t))
	var first []string
	for i, o := range t.Outcomes {
		fmt.Fprintf(tw, "\nPath %d of %d (probability %s): %s\n", i+1, len(t.Outcomes), percent(o.Probability), describeOutcome(&o))
		common := 0
		if i > 0 {
			for common < len(first) && common < len(o.Path) && first[common] == o.Path[common] {
				common++
			}
			if common > 0 {
				fmt.Fprintf(tw, "  (as path 1 for %d lines)\n", common)
			}
		} else {
			first = o.Path
		}
		for _, line := range o.Path[common:] {
			fmt.Fprintf(tw, "  %s\n", line)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(t.Outcomes) > 0 {
		fmt.Fprintf(tw, "\nOUTCOME\tVERDICT\tDNAT\tPROBABILITY\tMASQUERADE\tENDPOINT OF\tNODE\tINTERNAL\tEXTERNAL\tEXTERNAL FROM NODE\n")
		for i, o := range t.Outcomes {
			owner, node, uses := "-", "-", "-\t-\t-"
			if e := o.Endpoint; e != nil {
				owner = e.Namespace + "/" + e.Name + ":" + dashIfEmpty(e.Port)
				node = dashIfEmpty(e.Endpoint.NodeName)
				uses = e.Endpoint.Internal + "\t" + e.Endpoint.External + "\t" + e.Endpoint.ExternalFromNode
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", i+1, o.Verdict, dashIfEmpty(o.DNAT), percent(o.Probability),
				yesNo(o.Masquerade), owner, node, uses)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	d := &t.Destination
	switch {
	case len(d.Matches) > 0:
		for _, m := range d.Matches {
			fmt.Fprintf(tw, "\nDestination %s:%d/%s is Service %s/%s port %s as its %s\n", d.IP, d.Port, strings.ToLower(d.Protocol),
				m.Namespace, m.Name, dashIfEmpty(m.Port.Name), m.As)
			if err := tw.Flush(); err != nil {
				return err
			}
			svc := &Service{Namespace: m.Namespace, Name: m.Name, Ports: []ServicePort{m.Port}}
			svc.Ports[0].KernelObjects = nil
			var b strings.Builder
			if err := PrintService(&b, svc); err != nil {
				return err
			}
			// Drop PrintService's "Service NS/NAME" header and blank line.
			body := b.String()
			if _, rest, ok := strings.Cut(body, "\n\n"); ok {
				body = rest
			}
			fmt.Fprint(tw, body)
		}
	case d.ServiceCIDR != "":
		fmt.Fprintf(tw, "\nDestination %s:%d/%s is no Service's, inside the ServiceCIDR %s\n", d.IP, d.Port, strings.ToLower(d.Protocol), d.ServiceCIDR)
	default:
		fmt.Fprintf(tw, "\nDestination %s:%d/%s is no Service's in this proxy's model\n", d.IP, d.Port, strings.ToLower(d.Protocol))
	}
	return tw.Flush()
}

func describeVerdict(t *Trace) string {
	dnat := map[string]bool{}
	masq := false
	for _, o := range t.Outcomes {
		if o.DNAT != "" {
			dnat[o.DNAT] = true
		}
		masq = masq || o.Masquerade
	}
	s := t.Verdict
	switch t.Verdict {
	case "ACCEPT":
		if len(dnat) == 0 {
			s += " (not translated)"
		} else {
			s += fmt.Sprintf(", DNAT to %s", count(len(dnat), "endpoint"))
		}
	case "DROP":
		s += " (the client times out)"
	case "REJECT":
		s += " (the client is refused at once)"
	}
	return s + "; masquerade " + yesNo(masq)
}

func describeOutcome(o *TraceOutcome) string {
	s := o.Verdict
	if o.DNAT != "" {
		s += ", DNAT to " + o.DNAT
	}
	if o.SNAT != "" {
		s += ", SNAT to " + o.SNAT
	}
	return s + ", masquerade " + yesNo(o.Masquerade)
}

func percent(p float64) string { return fmt.Sprintf("%.1f%%", 100*p) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
