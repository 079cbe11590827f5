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
// per column the counts of passed, failed and skipped specs.
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
	_, err := io.WriteString(w, b.String())
	return err
}
