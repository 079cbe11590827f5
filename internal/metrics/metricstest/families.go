// Package metricstest lists the metric families a Gatherer exposes, as a scrape
// shows them (name, type and label names), and reads and writes such lists as text
// files, so tests can compare kproxy's /metrics with upstream kube-proxy's.
package metricstest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Family is one metric family: its name, its type as the exposition's TYPE line
// spells it (counter, gauge, histogram, summary, untyped) and the sorted label names
// of its series (without a histogram's le or a summary's quantile). A vector with no
// series is absent from a scrape, so a Family only exists once a series does.
type Family struct {
	Name   string
	Type   string
	Labels []string
}

// String is the file format's line: "name type labels", labels comma-separated or
// "-" when there are none.
func (f Family) String() string {
	labels := "-"
	if len(f.Labels) > 0 {
		labels = strings.Join(f.Labels, ",")
	}
	return f.Name + " " + f.Type + " " + labels
}

// Gather returns g's families sorted by name.
func Gather(g prometheus.Gatherer) ([]Family, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, err
	}
	out := make([]Family, 0, len(mfs))
	for _, mf := range mfs {
		f := Family{Name: mf.GetName(), Type: typeName(mf.GetType())}
		seen := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if !seen[lp.GetName()] {
					seen[lp.GetName()] = true
					f.Labels = append(f.Labels, lp.GetName())
				}
			}
		}
		slices.Sort(f.Labels)
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b Family) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func typeName(t dto.MetricType) string {
	switch t {
	case dto.MetricType_COUNTER:
		return "counter"
	case dto.MetricType_GAUGE:
		return "gauge"
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		return "histogram"
	case dto.MetricType_SUMMARY:
		return "summary"
	default:
		return "untyped"
	}
}

// ReadFile reads a family list: one Family.String() line each; blank lines, lines
// starting with "#" and anything after " #" on a line are comments.
func ReadFile(path string) ([]Family, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Family
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 {
			return nil, fmt.Errorf("%s:%d: want \"name type labels\", got %q", path, n, line)
		}
		f := Family{Name: fields[0], Type: fields[1]}
		if fields[2] != "-" {
			f.Labels = strings.Split(fields[2], ",")
		}
		out = append(out, f)
	}
	return out, sc.Err()
}

// WriteFile writes fams under header (each header line is written as a "# " comment).
func WriteFile(path, header string, fams []Family) error {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(header), "\n") {
		b.WriteString(strings.TrimSpace("# " + line))
		b.WriteByte('\n')
	}
	for _, f := range fams {
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// Index maps fams by name.
func Index(fams []Family) map[string]Family {
	m := make(map[string]Family, len(fams))
	for _, f := range fams {
		m[f.Name] = f
	}
	return m
}

// Diff compares got with want, family by family, and describes each difference on
// one line: a family missing from got, one got has in excess, or one whose type or
// labels differ. keep, if not nil, limits the comparison to the names it accepts.
func Diff(got, want []Family, keep func(name string) bool) []string {
	if keep == nil {
		keep = func(string) bool { return true }
	}
	g, w := Index(got), Index(want)
	var diffs []string
	for _, wf := range want {
		if !keep(wf.Name) {
			continue
		}
		gf, ok := g[wf.Name]
		switch {
		case !ok:
			diffs = append(diffs, "missing: "+wf.String())
		case gf.String() != wf.String():
			diffs = append(diffs, fmt.Sprintf("differs: %s, want %s", gf, wf))
		}
	}
	for _, gf := range got {
		if _, ok := w[gf.Name]; !ok && keep(gf.Name) {
			diffs = append(diffs, "unexpected: "+gf.String())
		}
	}
	return diffs
}
