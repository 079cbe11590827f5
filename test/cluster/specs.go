package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
)

// SpecSet names which of upstream's sig-network specs a run takes.
type SpecSet string

// The spec sets of kproxy-cluster e2e.
const (
	// SpecsShort is the focused subset that `make test` runs.
	SpecsShort SpecSet = "short"
	// SpecsFull is every spec that concerns a service proxy, except the slow ones.
	SpecsFull SpecSet = "full"
	// SpecsSlow is the slow ones: [Slow], and the session-affinity timeout specs (which
	// wait out the affinity timeout and take minutes each).
	SpecsSlow SpecSet = "slow"
)

// proxyArea is the part of sig-network that concerns a service proxy: Services (with
// session affinity, the [Disruptive] restarts, traffic policies), conntrack, kube-proxy's
// own specs, DNS (resolved through the kube-dns Service), EndpointSlices, Networking
// with Services, dual-stack Services, traffic distribution and topology hints,
// ServiceCIDRs, hostPort and no-SNAT pod traffic.
var proxyArea = regexp.MustCompile(`^\[sig-network\] (Services |Conntrack |KubeProxy |LocalhostNodePorts |DNS |EndpointSlice|Networking Granular Checks: Services |Networking should |\[Feature:IPv6DualStack\] |Traffic Distribution |Topology Hints |Service CIDRs |ServiceCIDR |Service endpoints |HostPort |NoSNAT )`)

var slowSpec = regexp.MustCompile(`\[Slow\]|session affinity timeout`)

// shortSpecs are the specs of SpecsShort (substrings of the spec names): the core of
// Services in both families, NodePort from outside, session affinity, source IP,
// hairpin, externalTrafficPolicy, service-proxy-name, no endpoints, conntrack across
// pod restarts, and DNS through the kube-dns Service.
var shortSpecs = []string{
	"Services should serve a basic endpoint from pods",
	"Services should serve multiport endpoints from pods",
	"Services should be able to create a functioning NodePort service",
	"Services should have session affinity work for service with type clusterIP",
	"Services should preserve source pod IP for traffic thru service cluster IP",
	"Services should allow pods to hairpin back to themselves through services",
	"Services should support externalTrafficPolicy=Local for type=NodePort",
	"Services should implement service.kubernetes.io/service-proxy-name",
	"Services should be rejected when no endpoints exist",
	"Secondary IP Family [LinuxOnly] should function for pod-Service: http",
	"Conntrack should be able to preserve UDP traffic when server pod cycles for a ClusterIP service",
	"DNS should provide DNS for services",
}

// Spec is one spec of upstream's e2e binary.
type Spec struct {
	Name   string   // the full text: container texts and the It text
	Labels []string // ginkgo labels
}

// SelectSpecs picks set's specs from all (the e2e binary's dry-run listing).
func SelectSpecs(all []Spec, set SpecSet) ([]Spec, error) {
	var out []Spec
	for _, s := range all {
		if !proxyArea.MatchString(s.Name) {
			continue
		}
		slow := slowSpec.MatchString(s.Name)
		switch set {
		case SpecsFull:
			if !slow {
				out = append(out, s)
			}
		case SpecsSlow:
			if slow {
				out = append(out, s)
			}
		case SpecsShort:
			for _, sub := range shortSpecs {
				if strings.Contains(s.Name, sub) && !slow {
					out = append(out, s)
					break
				}
			}
		default:
			return nil, fmt.Errorf("unknown spec set %q (short, full, slow)", set)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("spec set %s: no spec of the e2e binary matches", set)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// FocusRegexp matches exactly the names of specs. Ginkgo matches --focus against the
// suite's description, a space and the spec's full text, hence the leading space.
func FocusRegexp(specs []Spec) string {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = regexp.QuoteMeta(s.Name)
	}
	return " (?:" + strings.Join(names, "|") + ")$"
}

// SpecResult is one spec's outcome in a ginkgo JSON report.
type SpecResult struct {
	Name    string
	State   string // passed, failed, skipped, pending, interrupted, aborted, panicked, timedout
	Seconds float64
	Failure string // the failure message, first line
}

// ginkgoReport is the part of ginkgo's JSON report (--json-report) that is read here.
type ginkgoReport []struct {
	SpecReports []struct {
		ContainerHierarchyTexts  []string
		ContainerHierarchyLabels [][]string
		LeafNodeText             string
		LeafNodeType             string
		LeafNodeLabels           []string
		State                    string
		RunTime                  int64 // nanoseconds
		Failure                  struct {
			Message string
		}
	}
}

// ReadGinkgoReport reads a ginkgo JSON report: the It specs, as listed (dry run) or run.
func ReadGinkgoReport(path string) ([]Spec, []SpecResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var rep ginkgoReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	var specs []Spec
	var results []SpecResult
	for _, suite := range rep {
		for _, r := range suite.SpecReports {
			if r.LeafNodeType != "It" {
				continue
			}
			name := strings.Join(append(append([]string(nil), r.ContainerHierarchyTexts...), r.LeafNodeText), " ")
			var labels []string
			for _, ls := range r.ContainerHierarchyLabels {
				labels = append(labels, ls...)
			}
			labels = append(labels, r.LeafNodeLabels...)
			specs = append(specs, Spec{Name: name, Labels: labels})
			msg, _, _ := strings.Cut(strings.TrimSpace(r.Failure.Message), "\n")
			results = append(results, SpecResult{Name: name, State: r.State, Seconds: float64(r.RunTime) / 1e9, Failure: msg})
		}
	}
	return specs, results, nil
}
