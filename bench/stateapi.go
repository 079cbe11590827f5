package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/kproxy/kproxy/test/lab"
)

// StateAPIDoc is what one document of kproxy's state API or status page costs at
// one size: its size and the time from request to the last byte (median and
// maximum of StateAPIRequests requests).
type StateAPIDoc struct {
	Name        string
	Bytes       int
	Median, Max time.Duration
}

// StateAPIResult is the state API scenario (issue 14) of one proxy at one size: the
// documents, and the proxy's VmRSS before the first request and after the last.
type StateAPIResult struct {
	Docs                []StateAPIDoc
	RSSBefore, RSSAfter float64
}

// StateAPIRequests is how many times each document is fetched.
const StateAPIRequests = 5

// MeasureStateAPI fetches, from node1 where the proxy runs, the documents an
// operator's tools read: the node summary, one Service (svc), a page of the
// Service list, the status page, and a verification. It reports false when the
// proxy serves no state API (upstream's kube-proxy).
func MeasureStateAPI(ctx context.Context, l *lab.Lab, r *Running, svc *Svc) (*StateAPIResult, bool, error) {
	client := &http.Client{Transport: &http.Transport{DialContext: lab.DialInNamespace(l.Node1.NS)}, Timeout: time.Minute}
	const base = "http://127.0.0.1:10249"
	get := func(path string) (int, time.Duration, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return 0, 0, err
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, 0, err
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		took := time.Since(start)
		if err != nil {
			return 0, 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, 0, fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return int(n), took, nil
	}
	if _, _, err := get("/kproxy/v1alpha1/node"); err != nil {
		return nil, false, nil
	}
	res := &StateAPIResult{RSSBefore: r.RSS()}
	for _, d := range []struct{ name, path string }{
		{"node summary (GET /kproxy/v1alpha1/node)", "/kproxy/v1alpha1/node"},
		{"one Service (GET /kproxy/v1alpha1/services/NS/NAME)", "/kproxy/v1alpha1/services/default/" + svc.Name},
		{"a page of 500 Services (GET /kproxy/v1alpha1/services?limit=500)", "/kproxy/v1alpha1/services?limit=500"},
		{"status page (GET /kproxy/)", "/kproxy/"},
		{"verification (GET /kproxy/v1alpha1/verify)", "/kproxy/v1alpha1/verify"},
	} {
		doc := StateAPIDoc{Name: d.name}
		var times []time.Duration
		for range StateAPIRequests {
			n, took, err := get(d.path)
			if err != nil {
				return nil, true, err
			}
			doc.Bytes = n
			times = append(times, took)
		}
		slices.Sort(times)
		doc.Median, doc.Max = times[len(times)/2], times[len(times)-1]
		res.Docs = append(res.Docs, doc)
	}
	res.RSSAfter = r.RSS()
	return res, true, nil
}

// stateAPIRows are the report's rows of the state API scenario: the proxy that
// serves it in the first column, "-" for the other.
func stateAPIRows(mode, size string, fa, fb *StateAPIResult) []row {
	var rows []row
	cell := func(f *StateAPIResult, i int) string {
		if f == nil || i >= len(f.Docs) {
			return "-"
		}
		d := f.Docs[i]
		return fmt.Sprintf("%.1f KiB in %s (max %s)", float64(d.Bytes)/1024, FmtSeconds(d.Median.Seconds()), FmtSeconds(d.Max.Seconds()))
	}
	var docs []StateAPIDoc
	switch {
	case fa != nil:
		docs = fa.Docs
	case fb != nil:
		docs = fb.Docs
	}
	for i, d := range docs {
		rows = append(rows, row{mode, "state API: " + d.Name, size, cell(fa, i), cell(fb, i), "-"})
	}
	rss := func(f *StateAPIResult) string {
		if f == nil {
			return "-"
		}
		return fmt.Sprintf("%s before, %s after", FmtMiB(f.RSSBefore), FmtMiB(f.RSSAfter))
	}
	if fa != nil || fb != nil {
		rows = append(rows, row{mode, "VmRSS around the state API requests", size, rss(fa), rss(fb), "-"})
	}
	return rows
}
