package takeover

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kproxy/kproxy/test/cluster/prober"
)

// Result is what Run observed: one Phase per rollout (after an optional baseline).
type Result struct {
	Label       string   `json:"label,omitempty"`
	Namespace   string   `json:"namespace"`
	ClusterIPs  []string `json:"clusterIPs,omitempty"` // of the backend Service
	NodePortTCP int32    `json:"nodePortTCP,omitempty"`
	NodePortUDP int32    `json:"nodePortUDP,omitempty"`
	Phases      []Phase  `json:"phases"`
}

// Phase is one rollout (or the baseline) and what every prober saw during it: from
// just before the image was set until Settle after the rollout completed.
type Phase struct {
	Name    string          `json:"name"`            // BaselinePhase, or the image rolled out
	Image   string          `json:"image,omitempty"` // empty for the baseline
	Start   time.Time       `json:"start"`
	End     time.Time       `json:"end"`
	Rollout prober.Duration `json:"rollout"`       // how long SetProxyImage took
	Err     string          `json:"err,omitempty"` // why the phase did not complete
	Probers []ProberSummary `json:"probers"`
}

// BaselinePhase names the phase that changes nothing.
const BaselinePhase = "baseline"

// ProberSummary is one prober's window: Location is "pod on <node>" or External.
type ProberSummary struct {
	Location string         `json:"location"`
	Summary  prober.Summary `json:"summary"`
}

// Failures lists every violation of the takeover's requirement, one sentence each: a
// phase that did not complete, a target with no probe counted, a failed probe, an
// outage longer than maxOutage. None means the takeover passed.
func (r Result) Failures(maxOutage time.Duration) []string {
	var fs []string
	if len(r.Phases) == 0 {
		fs = append(fs, "no phase ran")
	}
	for _, ph := range r.Phases {
		if ph.Err != "" {
			fs = append(fs, fmt.Sprintf("phase %s: %s", ph.Name, ph.Err))
		}
		if len(ph.Probers) == 0 {
			fs = append(fs, fmt.Sprintf("phase %s: no prober reported", ph.Name))
		}
		for _, p := range ph.Probers {
			if len(p.Summary.Targets) == 0 {
				fs = append(fs, fmt.Sprintf("phase %s, %s: no targets", ph.Name, p.Location))
			}
			for _, t := range p.Summary.Targets {
				where := fmt.Sprintf("phase %s, %s, %s", ph.Name, p.Location, t.Target)
				if t.Attempts == 0 {
					fs = append(fs, where+": no probe counted")
				}
				if t.Failures > 0 {
					msg := fmt.Sprintf("%s: %d of %d probes failed", where, t.Failures, t.Attempts)
					if len(t.FirstErrors) > 0 {
						e := t.FirstErrors[0]
						msg += fmt.Sprintf(" (the first at %s: %s)", e.Time.Format("15:04:05.000"), e.Error)
					}
					fs = append(fs, msg)
				}
				if o := t.LongestOutage; time.Duration(o.Duration) > maxOutage {
					fs = append(fs, fmt.Sprintf("%s: outage of %s (over %s), from %s to %s", where, o, maxOutage, o.From.Format("15:04:05.000"), o.To.Format("15:04:05.000")))
				}
			}
		}
	}
	return fs
}

// OK reports whether no probe failed and no outage exceeded maxOutage, in every phase.
func (r Result) OK(maxOutage time.Duration) bool { return len(r.Failures(maxOutage)) == 0 }

// WriteMarkdown writes the result as a Markdown table, a row per phase, prober and
// target, followed by the verdict against maxOutage and the failures.
func (r Result) WriteMarkdown(w io.Writer, maxOutage time.Duration) error {
	var b strings.Builder
	title := "Takeover"
	if r.Label != "" {
		title += ": " + r.Label
	}
	fmt.Fprintf(&b, "### %s\n\n", cell(title))
	if len(r.ClusterIPs) > 0 {
		fmt.Fprintf(&b, "Service %s/%s: ClusterIPs %s, NodePorts %d/TCP and %d/UDP.\n\n",
			r.Namespace, BackendName, strings.Join(r.ClusterIPs, ", "), r.NodePortTCP, r.NodePortUDP)
	}
	b.WriteString("| phase | rollout | prober | target | attempts | failures | longest outage | backends |\n")
	b.WriteString("|---|---:|---|---|---:|---:|---:|---:|\n")
	for _, ph := range r.Phases {
		rollout := "-"
		if ph.Image != "" {
			rollout = time.Duration(ph.Rollout).Round(100 * time.Millisecond).String()
		}
		if len(ph.Probers) == 0 {
			fmt.Fprintf(&b, "| %s | %s | - | - | - | - | - | - |\n", cell(ph.Name), rollout)
		}
		for _, p := range ph.Probers {
			for _, t := range p.Summary.Targets {
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %d | %s | %d |\n",
					cell(ph.Name), rollout, cell(p.Location), cell(t.Target), t.Attempts, t.Failures, t.LongestOutage, len(t.Backends))
			}
		}
	}
	b.WriteString("\n")
	if fs := r.Failures(maxOutage); len(fs) == 0 {
		fmt.Fprintf(&b, "**Passed**: no probe failed and no outage exceeded %s.\n", maxOutage)
	} else {
		fmt.Fprintf(&b, "**Failed** (no failed probe and no outage over %s allowed):\n\n", maxOutage)
		for _, f := range fs {
			fmt.Fprintf(&b, "- %s\n", f)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cell escapes s for a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
