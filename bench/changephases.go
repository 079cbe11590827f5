package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kproxy/kproxy/internal/inspect"
	"github.com/kproxy/kproxy/test/lab"
)

// ChangePhases splits one change's latency at the moments the bench can observe from
// outside the proxy, to say where a slow change spent its time:
//
//	update returned ─Delivered─▶ the bench's own watch saw the update
//	                 ─Queued───▶ the proxy's sync that wrote it started
//	                 ─Sync─────▶ that sync ended (the kernel had the rules)
//	                 ─Answered─▶ the probe through the ClusterIP reached the new pod
//
// Delivered is the API server's watch fan-out as any client sees it (it can be
// slightly negative: the event may reach a watcher before the update's response).
// Queued is the proxy's own delay: its informer, handlers and sync scheduling. The
// proxy's sync record comes from kproxy's state API, so only kproxy's changes are
// split (Found false otherwise, or when no writing sync started after the update).
type ChangePhases struct {
	Found                             bool
	Delivered, Queued, Sync, Answered time.Duration
	// Operations is the number of kernel operations the sync wrote.
	Operations int
}

// sliceWatch records when the bench's own watch on one namespace's EndpointSlices
// sees each resourceVersion.
type sliceWatch struct {
	mu   sync.Mutex
	seen map[string]time.Time
	stop func()
}

// watchSlices starts a watch on ns's EndpointSlices from their current resourceVersion.
func watchSlices(ctx context.Context, ld *Loader, ns string) (*sliceWatch, error) {
	cs := ld.Lab.Client.DiscoveryV1().EndpointSlices(ns)
	list, err := cs.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("list endpointslices: %w", err)
	}
	w, err := cs.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		return nil, fmt.Errorf("watch endpointslices: %w", err)
	}
	sw := &sliceWatch{seen: map[string]time.Time{}, stop: w.Stop}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Modified {
				continue
			}
			if m, err := meta.Accessor(ev.Object); err == nil {
				sw.mu.Lock()
				sw.seen[m.GetResourceVersion()] = time.Now()
				sw.mu.Unlock()
			}
		}
	}()
	return sw, nil
}

// seenAt is when the watch saw resourceVersion rv, waiting up to a second for it.
func (sw *sliceWatch) seenAt(ctx context.Context, rv string) (time.Time, bool) {
	deadline := time.Now().Add(time.Second)
	for {
		sw.mu.Lock()
		t, ok := sw.seen[rv]
		sw.mu.Unlock()
		if ok || time.Now().After(deadline) || ctx.Err() != nil {
			return t, ok
		}
		time.Sleep(time.Millisecond)
	}
}

// syncSource reads the proxy's recent syncs from kproxy's state API on node1.
type syncSource struct {
	client *http.Client
}

func newSyncSource(l *lab.Lab) *syncSource {
	return &syncSource{client: &http.Client{Transport: &http.Transport{DialContext: lab.DialInNamespace(l.Node1.NS)}, Timeout: 10 * time.Second}}
}

// firstWriteAfter is the earliest sync of any family that started at or after t and
// wrote to the kernel, waiting up to a second for its record (a sync is recorded when
// its follow-up work is done, which can be after the kernel had its rules); false
// when the proxy serves no state API or no such sync was recorded.
func (s *syncSource) firstWriteAfter(ctx context.Context, t time.Time) (inspect.Sync, bool) {
	deadline := time.Now().Add(time.Second)
	for {
		sy, found, served := s.syncAfter(ctx, t)
		if found || !served || time.Now().After(deadline) || ctx.Err() != nil {
			return sy, found
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// syncAfter is one look at the proxy's syncs for firstWriteAfter; served is false
// when the proxy does not serve its node document.
func (s *syncSource) syncAfter(ctx context.Context, t time.Time) (sy inspect.Sync, found, served bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:10249"+inspect.PathPrefix+"node", nil)
	if err != nil {
		return inspect.Sync{}, false, false
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return inspect.Sync{}, false, false
	}
	defer resp.Body.Close()
	var node inspect.Node
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&node) != nil {
		return inspect.Sync{}, false, false
	}
	for _, f := range node.Families {
		for _, r := range f.Syncs {
			if r.Wrote && !r.Start.Before(t) && (!found || r.Start.Before(sy.Start)) {
				sy, found = r, true
			}
		}
	}
	return sy, found, true
}

// phasesOf splits one change: the update was sent at sent and returned at written
// with resourceVersion rv, and the probe answered at answered.
func phasesOf(ctx context.Context, sw *sliceWatch, src *syncSource, rv string, sent, written, answered time.Time) ChangePhases {
	seen, ok := sw.seenAt(ctx, rv)
	if !ok {
		return ChangePhases{}
	}
	sy, ok := src.firstWriteAfter(ctx, sent)
	if !ok {
		return ChangePhases{}
	}
	end := sy.Start.Add(time.Duration(sy.Duration * float64(time.Second)))
	return ChangePhases{
		Found:     true,
		Delivered: seen.Sub(written),
		Queued:    sy.Start.Sub(seen),
		Sync:      end.Sub(sy.Start),
		Answered:  answered.Sub(end),

		Operations: sy.Operations,
	}
}

// SlowestChanges is how many of a series' slowest changes the report splits.
const SlowestChanges = 3

// phaseLines describe where the median change and the SlowestChanges slowest changes
// of one series went; nil when none was split.
func phaseLines(c *ChangeResult) []string {
	if c == nil || len(c.Phases) != len(c.Latencies) {
		return nil
	}
	idx := make([]int, 0, len(c.Latencies))
	for i := range c.Latencies {
		if c.Phases[i].Found {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	slices.SortFunc(idx, func(a, b int) int { return int(c.Latencies[a] - c.Latencies[b]) })
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }
	line := func(label string, i int) string {
		p := c.Phases[i]
		return fmt.Sprintf("%s %s ms = delivered %s + queued in the proxy %s + sync %s + answered %s",
			label, ms(c.Latencies[i]), ms(p.Delivered), ms(p.Queued), ms(p.Sync), ms(p.Answered))
	}
	out := []string{line("median", idx[len(idx)/2])}
	var slow []string
	for k := len(idx) - 1; k >= 0 && k >= len(idx)-SlowestChanges; k-- {
		slow = append(slow, line("", idx[k]))
	}
	out = append(out, "slowest:"+strings.Join(slow, ";"))
	return out
}
