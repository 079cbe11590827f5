package statuspage

import (
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	"github.com/kproxy/kproxy/internal/inspect"
)

// pages holds the parsed templates; it is never modified after parsing.
var pages = template.Must(template.New("layout").Funcs(template.FuncMap{
	"stamp":      stamp,
	"seconds":    func(s float64) string { return formatDuration(time.Duration(s * float64(time.Second))) },
	"kind":       kind,
	"join":       func(s []string) string { return strings.Join(s, ", ") },
	"detector":   detector,
	"drift":      inspect.DriftSummary,
	"serviceURL": ServiceURL,
	"count":      count,
	"pageSize":   func() int { return PageSize },
	"traffic":    traffic,
	"conditions": func(ep inspect.Endpoint) string { return inspect.Conditions(&ep) },
}).Parse(layoutTemplate + `{{define "node"}}` + nodeTemplate + `{{end}}{{define "service"}}` + serviceTemplate + `{{end}}`))

// RenderNode writes the node page of p as HTML.
func RenderNode(w io.Writer, p *NodePage) error {
	if err := pages.ExecuteTemplate(w, "node", p); err != nil {
		return fmt.Errorf("rendering the node page: %w", err)
	}
	return nil
}

// RenderService writes the page of one Service as HTML.
func RenderService(w io.Writer, p *ServicePage) error {
	if err := pages.ExecuteTemplate(w, "service", p); err != nil {
		return fmt.Errorf("rendering the page of %s/%s: %w", p.Service.Namespace, p.Service.Name, err)
	}
	return nil
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000 UTC") }

// kind is a sync's kind as `kube-proxy explain node` prints it.
func kind(s inspect.Sync) string {
	k := "partial"
	if s.Full {
		k = "full"
	}
	if !s.Wrote {
		k += ", nothing written"
	}
	return k
}

func detector(d inspect.LocalDetector) string {
	s := d.Mode
	if len(d.CIDRs) > 0 {
		s += " " + strings.Join(d.CIDRs, ", ")
	}
	if d.Interface != "" {
		s += " " + d.Interface
	}
	return s
}

// count says how many Services the table shows out of how many match and exist.
func count(s *inspect.ServiceSearch) string {
	n := len(s.List.Items)
	switch {
	case s.Total == 0:
		return "No Service."
	case s.Matched == 0:
		return fmt.Sprintf("No Service matches (%d in all).", s.Total)
	case s.Matched == s.Total:
		return fmt.Sprintf("Showing %d of %d Services.", n, s.Total)
	default:
		return fmt.Sprintf("Showing %d of %d matching Services (%d in all).", n, s.Matched, s.Total)
	}
}

// traffic describes a Traffic or *Traffic under policy.
func traffic(t any, policy string) string {
	switch t := t.(type) {
	case inspect.Traffic:
		return inspect.DescribeTraffic(&t, policy)
	case *inspect.Traffic:
		return inspect.DescribeTraffic(t, policy)
	}
	return ""
}
