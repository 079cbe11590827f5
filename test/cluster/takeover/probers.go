package takeover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/kproxy/kproxy/test/cluster/prober"
	"github.com/kproxy/kproxy/test/lab"
)

// External is the location of the prober in the client namespace.
const External = "external"

// collectTimeout bounds one read of a prober's summary.
const collectTimeout = 30 * time.Second

// source reads one prober's summaries.
type source interface {
	location() string
	// read returns the current window's summary or, with reset, ends it.
	read(ctx context.Context, reset bool) (prober.Summary, error)
}

// podSource is a prober pod, read with `kubectl exec`.
type podSource struct {
	c              Cluster
	namespace, pod string
	node           string
}

func (p *podSource) location() string { return "pod on " + p.node }

func (p *podSource) read(ctx context.Context, reset bool) (prober.Summary, error) {
	ctx, cancel := context.WithTimeout(ctx, collectTimeout)
	defer cancel()
	args := []string{"-n", p.namespace, "exec", p.pod, "--", "/kproxy-prober", "report", "--from=http://" + proberListen}
	if reset {
		args = append(args, "--reset")
	}
	out, err := p.c.Kubectl(ctx, nil, args...)
	if err != nil {
		return prober.Summary{}, fmt.Errorf("%s (%s): %w", p.location(), p.pod, err)
	}
	s, err := parseSummary(out)
	if err != nil {
		return prober.Summary{}, fmt.Errorf("%s (%s): %w", p.location(), p.pod, err)
	}
	return s, nil
}

// externalSource is the prober process in the client namespace, read over HTTP from
// inside that namespace.
type externalSource struct {
	proc *lab.Process
	url  string
	http *http.Client
}

func newExternalSource(ns *lab.NS, proc *lab.Process, listen string) *externalSource {
	return &externalSource{proc: proc, url: "http://" + listen, http: &http.Client{
		Transport: &http.Transport{DialContext: ns.Dial, DisableKeepAlives: true},
	}}
}

func (e *externalSource) location() string { return External }

func (e *externalSource) read(ctx context.Context, reset bool) (prober.Summary, error) {
	if done, _ := e.proc.Exited(); done {
		return prober.Summary{}, fmt.Errorf("%s: the prober exited (%w); log:\n%s", External, e.proc.ExitReason(), e.proc.LogTail(20))
	}
	ctx, cancel := context.WithTimeout(ctx, collectTimeout)
	defer cancel()
	method, path := http.MethodGet, "/summary"
	if reset {
		method, path = http.MethodPost, "/reset"
	}
	req, err := http.NewRequestWithContext(ctx, method, e.url+path, nil)
	if err != nil {
		return prober.Summary{}, err
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return prober.Summary{}, fmt.Errorf("%s: %w", External, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return prober.Summary{}, fmt.Errorf("%s: %s %s: %w", External, method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return prober.Summary{}, fmt.Errorf("%s: %s %s: %s", External, method, path, resp.Status)
	}
	return parseSummary(string(body))
}

// parseSummary reads a Summary from out, ignoring anything around the JSON object (a
// kubectl warning, say).
func parseSummary(out string) (prober.Summary, error) {
	var s prober.Summary
	i, j := strings.IndexByte(out, '{'), strings.LastIndexByte(out, '}')
	if i < 0 || j < i {
		return s, fmt.Errorf("no summary in %q", truncate(out, 200))
	}
	if err := json.Unmarshal([]byte(out[i:j+1]), &s); err != nil {
		return s, fmt.Errorf("summary: %w", err)
	}
	return s, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// tracked is a source and the window it is expected to report next, so that a
// prober that restarted (and so lost counts) is noticed.
type tracked struct {
	source
	targets []string // what it must report on
	next    int      // -1 before the first read
}

// collect reads (and, with reset, ends) the window of every source concurrently, in
// the order of srcs.
func collect(ctx context.Context, srcs []*tracked, reset bool) ([]ProberSummary, error) {
	out := make([]ProberSummary, len(srcs))
	errs := make([]error, len(srcs))
	done := make(chan struct{})
	for i, s := range srcs {
		go func() {
			defer func() { done <- struct{}{} }()
			sum, err := s.read(ctx, reset)
			if err != nil {
				errs[i] = err
				return
			}
			if s.next >= 0 && sum.Window != s.next {
				errs[i] = fmt.Errorf("%s: reported window %d, want %d: the prober restarted and lost its counts", s.location(), sum.Window, s.next)
			}
			if reset {
				s.next = sum.Window + 1
			}
			var missing []string
			for _, t := range s.targets {
				if _, ok := sum.Target(t); !ok {
					missing = append(missing, t)
				}
			}
			if len(missing) > 0 {
				errs[i] = errors.Join(errs[i], fmt.Errorf("%s: does not probe %s", s.location(), strings.Join(missing, ", ")))
			}
			out[i] = ProberSummary{Location: s.location(), Summary: sum}
		}()
	}
	for range srcs {
		<-done
	}
	return out, errors.Join(errs...)
}
