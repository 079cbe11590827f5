package inspect

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kproxy/kproxy/internal/drift"
)

// PrintService writes svc as a human-readable report.
func PrintService(w io.Writer, svc *Service) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Service %s/%s\n", svc.Namespace, svc.Name)
	for i := range svc.Ports {
		p := &svc.Ports[i]
		name := p.Name
		if name == "" {
			name = "(unnamed)"
		}
		fmt.Fprintf(tw, "\nPort %s %s/%d (%s)\n", name, p.Protocol, p.Port, p.Family)
		fmt.Fprintf(tw, "  ClusterIP:\t%s\n", p.ClusterIP)
		if p.NodePort != 0 {
			fmt.Fprintf(tw, "  NodePort:\t%d\n", p.NodePort)
		}
		if len(p.ExternalIPs) > 0 {
			fmt.Fprintf(tw, "  External IPs:\t%s\n", strings.Join(p.ExternalIPs, ", "))
		}
		if len(p.LoadBalancerIPs) > 0 {
			fmt.Fprintf(tw, "  Load-balancer IPs:\t%s\n", strings.Join(p.LoadBalancerIPs, ", "))
		}
		if len(p.LoadBalancerSourceRanges) > 0 {
			fmt.Fprintf(tw, "  Allowed sources:\t%s (others are dropped)\n", strings.Join(p.LoadBalancerSourceRanges, ", "))
		}
		if p.HealthCheckNodePort != 0 {
			fmt.Fprintf(tw, "  Health check NodePort:\t%d\n", p.HealthCheckNodePort)
		}
		if p.SessionAffinitySeconds != 0 {
			fmt.Fprintf(tw, "  Session affinity:\tClientIP, %d s\n", p.SessionAffinitySeconds)
		}
		if p.TrafficDistribution != "" {
			fmt.Fprintf(tw, "  Traffic distribution:\t%s\n", p.TrafficDistribution)
		}
		fmt.Fprintf(tw, "  Internal traffic:\t%s\n", DescribeTraffic(&p.Internal, p.InternalTrafficPolicy))
		if p.External != nil {
			fmt.Fprintf(tw, "  External traffic:\t%s\n", DescribeTraffic(p.External, p.ExternalTrafficPolicy))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(p.Endpoints) == 0 {
			fmt.Fprintf(tw, "  Endpoints:\tnone\n")
		} else {
			fmt.Fprintf(tw, "  ENDPOINT\tNODE\tZONE\tCONDITIONS\tINTERNAL\tEXTERNAL\tEXTERNAL FROM NODE\n")
			for _, ep := range p.Endpoints {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", ep.Address, dashIfEmpty(ep.NodeName), dashIfEmpty(ep.Zone),
					Conditions(&ep), ep.Internal, ep.External, ep.ExternalFromNode)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(p.KernelObjects) > 0 {
			fmt.Fprintf(tw, "  Kernel objects:\n")
			for _, o := range p.KernelObjects {
				fmt.Fprintf(tw, "    %s\n", o)
			}
		}
	}
	return tw.Flush()
}

// DescribeTraffic says how traffic under policy is handled, as `kube-proxy
// explain` prints it (the status page shows the same words).
func DescribeTraffic(t *Traffic, policy string) string {
	s := fmt.Sprintf("policy %s: ", policy)
	switch t.Verdict {
	case VerdictForward:
		s += fmt.Sprintf("forwarded to the %s selection (%s)", t.Selection, count(len(t.Endpoints), "endpoint"))
	case VerdictReject:
		s += "rejected: no usable endpoint anywhere"
	case VerdictDrop:
		s += fmt.Sprintf("dropped: no usable endpoint in the %s selection on this node", t.Selection)
	}
	if t.Masquerade {
		s += "; masqueraded"
	}
	if t.ShortCircuit {
		s += "; from this node and its pods: to the Cluster selection"
	}
	return s
}

// Conditions lists an endpoint's conditions, locality and hints, comma-separated.
func Conditions(ep *Endpoint) string {
	var c []string
	if ep.Ready {
		c = append(c, "ready")
	}
	if ep.Serving && !ep.Ready {
		c = append(c, "serving")
	}
	if ep.Terminating {
		c = append(c, "terminating")
	}
	if len(c) == 0 {
		c = append(c, "not-ready")
	}
	if ep.IsLocal {
		c = append(c, "local")
	}
	if len(ep.NodeHints) > 0 {
		c = append(c, "for-nodes="+strings.Join(ep.NodeHints, "+"))
	}
	if len(ep.ZoneHints) > 0 {
		c = append(c, "for-zones="+strings.Join(ep.ZoneHints, "+"))
	}
	return strings.Join(c, ",")
}

// count is "1 endpoint", "2 endpoints".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// PrintNode writes n as a human-readable report; syncs limits the syncs shown per
// family.
func PrintNode(w io.Writer, n *Node, syncs int) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Node %s, mode %s\n", n.NodeName, n.Mode)
	for _, f := range n.Families {
		fmt.Fprintf(tw, "\n%s\n", f.Family)
		fmt.Fprintf(tw, "  Zone:\t%s\n", dashIfEmpty(f.Zone))
		fmt.Fprintf(tw, "  ServicePorts:\t%d\n", f.ServicePorts)
		fmt.Fprintf(tw, "  NodePort addresses:\t%s\n", dashIfEmpty(strings.Join(f.NodePortAddresses, ", ")))
		ld := f.LocalDetector.Mode
		if len(f.LocalDetector.CIDRs) > 0 {
			ld += " " + strings.Join(f.LocalDetector.CIDRs, ", ")
		}
		if f.LocalDetector.Interface != "" {
			ld += " " + f.LocalDetector.Interface
		}
		fmt.Fprintf(tw, "  Local traffic detector:\t%s\n", ld)
		if len(f.ServiceCIDRs) > 0 {
			fmt.Fprintf(tw, "  ServiceCIDRs:\t%s\n", strings.Join(f.ServiceCIDRs, ", "))
		}
		if d := f.LastDriftCheck; d != nil {
			fmt.Fprintf(tw, "  Drift:\t%s\n", DriftSummary(d))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(f.Syncs) == 0 {
			fmt.Fprintf(tw, "  Syncs:\tnone yet\n")
			continue
		}
		fmt.Fprintf(tw, "  SYNC START\tDURATION\tKIND\tCHANGED\tDELETED\tOPERATIONS\tRESULT\n")
		for i, s := range f.Syncs {
			if i == syncs {
				break
			}
			kind := "partial"
			if s.Full {
				kind = "full"
			}
			if !s.Wrote {
				kind += ", nothing written"
			}
			result := "ok"
			if s.Error != "" {
				result = "failed: " + s.Error
			}
			fmt.Fprintf(tw, "  %s\t%.1f ms\t%s\t%d\t%d\t%d\t%s\n", s.Start.UTC().Format("2006-01-02T15:04:05.000Z"),
				s.Duration*1000, kind, s.Changed, s.Deleted, s.Operations, result)
		}
	}
	return tw.Flush()
}

// DriftSummary is one line about the last comparison of the kernel with what was
// applied (nil: none yet).
func DriftSummary(d *drift.Report) string {
	if d == nil {
		return "not compared yet"
	}
	at := d.Checked.UTC().Format(time.TimeOnly)
	switch {
	case d.Skipped:
		return "last check at " + at + ": nothing committed to the kernel since the last clean comparison"
	case d.Count == 0:
		return fmt.Sprintf("last check at %s (%s): the kernel holds what was applied", at, seconds(d.Duration))
	}
	return fmt.Sprintf("last check at %s (%s): %s, repaired by a full sync", at, seconds(d.Duration), CountDifferences(d.Count))
}
