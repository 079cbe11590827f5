package statuspage

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
	"github.com/kproxy/kproxy/internal/inspect"
)

// Path is where the pages are served; Path alone is the node page.
const Path = "/kproxy/"

// Bounds of the node page.
const (
	// PageSize is how many Services the table shows at a time.
	PageSize = 100
	// SyncsShown is how many of each family's last syncs the table shows.
	SyncsShown = 10
	// ChartSpan is the time axis of the charts (the proxiers keep as much).
	ChartSpan = proxycore.SeriesSpan
)

// NodePage is what the node page shows.
type NodePage struct {
	Now  time.Time
	Node *inspect.Node
	// Syncs are each family's last syncs, at most SyncsShown, in Node.Families'
	// order.
	Syncs [][]inspect.Sync
	// Durations and Programming are the charts of the last ChartSpan.
	Durations, Programming *Chart
	// Errors are the failed syncs the proxiers kept, newest first.
	Errors []Failure
	// Query is the Service filter; Services the page of matching ones; Next the
	// address of the next page ("" on the last).
	Query    string
	Services *inspect.ServiceSearch
	Next     string
}

// Failure is one failed sync of one family.
type Failure struct {
	Family string
	inspect.Sync
}

// ServicePage is what a Service's page shows.
type ServicePage struct {
	Now      time.Time
	NodeName string
	Mode     string
	Service  *inspect.Service
}

// BuildNodePage reads the node page from src as of now: the node document, the
// proxiers' series and failures, and the page of Services that contain query after
// the continue token after.
func BuildNodePage(src *inspect.Source, now time.Time, query, after string) *NodePage {
	p := &NodePage{
		Now:         now,
		Node:        inspect.BuildNode(src.NodeName, src.Mode, src.Families),
		Durations:   &Chart{Title: "Sync durations, last hour", From: now.Add(-ChartSpan), To: now},
		Programming: &Chart{Title: "Network programming latency, last hour", From: now.Add(-ChartSpan), To: now},
		Query:       query,
		Services:    inspect.SearchServices(src.Families, query, after, PageSize),
	}
	for _, f := range p.Node.Families {
		p.Syncs = append(p.Syncs, f.Syncs[:min(len(f.Syncs), SyncsShown)])
	}
	for i := range src.Families {
		f := &src.Families[i]
		if f.Proxier == nil {
			continue
		}
		family := string(f.State.Family())
		addSeries(p, family, fmt.Sprintf("c%d", i%4), f.Proxier.Series())
		for _, r := range f.Proxier.Failures() {
			s := inspect.Sync{Start: r.Start, Duration: r.Duration.Seconds(), Full: r.Full, Wrote: r.Wrote,
				Changed: r.Changed, Deleted: r.Deleted, Operations: r.Operations}
			if r.Err != nil {
				s.Error = r.Err.Error()
			}
			p.Errors = append(p.Errors, Failure{Family: family, Sync: s})
		}
	}
	slices.SortStableFunc(p.Errors, compareFailures)
	if c := p.Services.List.Continue; c != "" {
		q := url.Values{"continue": {c}}
		if query != "" {
			q.Set("q", query)
		}
		p.Next = Path + "?" + q.Encode()
	}
	return p
}

// addSeries adds a family's buckets to the charts: the max and the mean of each,
// at the bucket's middle.
func addSeries(p *NodePage, family, class string, points []proxycore.SeriesPoint) {
	durMax := Line{Label: family + " max", Class: class}
	durMean := Line{Label: family + " mean", Class: class + " mean"}
	progMax := Line{Label: family + " max", Class: class}
	progMean := Line{Label: family + " mean", Class: class + " mean"}
	for i := range points {
		b := &points[i]
		at := b.Start.Add(proxycore.SeriesStep / 2)
		when := b.Start.UTC().Format("15:04:05") + "–" + b.Start.Add(proxycore.SeriesStep).UTC().Format("15:04:05 UTC")
		syncs := fmt.Sprintf("%d syncs", b.Syncs)
		if b.Syncs == 1 {
			syncs = "1 sync"
		}
		if b.Failures > 0 {
			syncs += fmt.Sprintf(" (%d failed)", b.Failures)
		}
		title := fmt.Sprintf("%s %s: %s, max %s, mean %s", family, when, syncs, formatDuration(b.DurationMax), formatDuration(b.DurationMean()))
		durMax.Points = append(durMax.Points, Point{At: at, Value: b.DurationMax, Title: title})
		durMean.Points = append(durMean.Points, Point{At: at, Value: b.DurationMean(), Title: title})
		if b.Programming.Count == 0 {
			continue
		}
		title = fmt.Sprintf("%s %s: %d endpoints changes programmed, max %s, mean %s", family, when, b.Programming.Count,
			formatDuration(b.Programming.Max), formatDuration(b.ProgrammingMean()))
		progMax.Points = append(progMax.Points, Point{At: at, Value: b.Programming.Max, Title: title})
		progMean.Points = append(progMean.Points, Point{At: at, Value: b.ProgrammingMean(), Title: title})
	}
	p.Durations.Lines = append(p.Durations.Lines, durMax, durMean)
	p.Programming.Lines = append(p.Programming.Lines, progMax, progMean)
}

// ServiceURL is the address of a Service's page.
func ServiceURL(namespace, name string) string {
	return Path + "services/" + url.PathEscape(namespace) + "/" + url.PathEscape(name)
}

// compareFailures orders failures newest first (ties by family).
func compareFailures(a, b Failure) int {
	return cmp.Or(b.Start.Compare(a.Start), cmp.Compare(a.Family, b.Family))
}
