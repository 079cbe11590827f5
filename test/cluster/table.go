package cluster

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Column is one run of the e2e specs: a proxy (upstream or kproxy) in a mode.
type Column struct {
	Proxy, Mode string
	Results     []SpecResult
}

// Title is the column's heading.
func (c Column) Title() string { return c.Proxy + " " + c.Mode }

func (c Column) byName() map[string]SpecResult {
	m := make(map[string]SpecResult, len(c.Results))
	for _, r := range c.Results {
		m[r.Name] = r
	}
	return m
}

// Regressions are the specs that upstream passed in a mode and kproxy did not in the
// same mode: the acceptance of make e2e-upstream is that there are none.
func Regressions(cols []Column) []string {
	upstream := map[string]map[string]SpecResult{}
	for _, c := range cols {
		if c.Proxy == "upstream" {
			upstream[c.Mode] = c.byName()
		}
	}
	var out []string
	for _, c := range cols {
		if c.Proxy == "upstream" {
			continue
		}
		ref, ok := upstream[c.Mode]
		if !ok {
			continue
		}
		got := c.byName()
		for name, r := range ref {
			if r.State == "passed" && got[name].State != "passed" {
				state := got[name].State
				if state == "" {
					state = "not run"
				}
				out = append(out, fmt.Sprintf("%s: %s (upstream passed): %s", c.Title(), state, name))
			}
		}
	}
	sort.Strings(out)
	return out
}

// WriteTable writes the Markdown table: one row per spec, one column per run, and
// per column the counts of passed, failed and skipped specs; then, for each spec that a
// run did not pass, that run's reason.
func WriteTable(w io.Writer, cols []Column) error {
	names := map[string]bool{}
	maps := make([]map[string]SpecResult, len(cols))
	for i, c := range cols {
		maps[i] = c.byName()
		for n := range maps[i] {
			names[n] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var b strings.Builder
	b.WriteString("| spec |")
	for _, c := range cols {
		b.WriteString(" " + c.Title() + " |")
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---|", len(cols)))
	b.WriteString("\n| **passed / failed / skipped** |")
	for _, m := range maps {
		var p, f, s int
		for _, r := range m {
			switch r.State {
			case "passed":
				p++
			case "skipped", "pending":
				s++
			default:
				f++
			}
		}
		fmt.Fprintf(&b, " %d / %d / %d |", p, f, s)
	}
	b.WriteString("\n")
	for _, n := range sorted {
		b.WriteString("| " + strings.ReplaceAll(strings.TrimPrefix(n, "[sig-network] "), "|", `\|`) + " |")
		for _, m := range maps {
			r, ok := m[n]
			switch {
			case !ok:
				b.WriteString(" not run |")
			case r.State == "passed":
				fmt.Fprintf(&b, " pass (%.0fs) |", r.Seconds)
			default:
				b.WriteString(" " + r.State + " |")
			}
		}
		b.WriteString("\n")
	}
	writeNotPassed(&b, cols, maps, sorted)
	_, err := io.WriteString(w, b.String())
	return err
}

// maxReason bounds a failure message in the table's notes: the first line of a
// failure names the cause; the rest is in the run's ginkgo.log.
const maxReason = 240

// writeNotPassed lists, for every spec that some run did not pass, each such run's
// state and the first line of ginkgo's failure or skip message: a reader sees why
// without the reports.
func writeNotPassed(b *strings.Builder, cols []Column, maps []map[string]SpecResult, sorted []string) {
	header := false
	for _, n := range sorted {
		var lines []string
		for i, m := range maps {
			r, ok := m[n]
			if ok && r.State == "passed" {
				continue
			}
			state, reason := "not run", ""
			if ok {
				state, reason = r.State, r.Failure
			}
			if runes := []rune(reason); len(runes) > maxReason {
				reason = string(runes[:maxReason]) + "…"
			}
			line := fmt.Sprintf("  - %s (%s)", cols[i].Title(), state)
			if reason != "" {
				line += ": " + strings.ReplaceAll(reason, "`", "'")
			}
			lines = append(lines, line)
		}
		if len(lines) == 0 {
			continue
		}
		if !header {
			b.WriteString("\n## The specs that did not pass, and why\n\nThe first line of ginkgo's failure or skip message, for each run that did not pass the spec.\n\n")
			header = true
		}
		b.WriteString("- " + strings.TrimPrefix(n, "[sig-network] ") + "\n" + strings.Join(lines, "\n") + "\n")
	}
}
