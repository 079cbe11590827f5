package proxycore

import (
	"sync"
	"time"

	"github.com/kproxy/kproxy/internal/dataplane/followup"
)

// The status page's charts (internal/statuspage) show the last hour of syncs. A
// proxier keeps it in fixed buckets, so that the cost is the same at 10 Services and
// at 30,000, and the same after a minute and after a month: a few tens of kilobytes
// per family, and a few additions under a mutex per sync.

// Series bounds: SeriesLen buckets of SeriesStep cover SeriesSpan.
const (
	SeriesStep = 10 * time.Second
	SeriesLen  = 360
	SeriesSpan = SeriesLen * SeriesStep
)

// FailuresLen is how many failed syncs a proxier keeps for the status page's error
// list, apart from the last HistoryLen syncs: a failure stays listed after 64 later
// syncs pushed it out of those.
const FailuresLen = 32

// SeriesPoint is what the syncs that started within one SeriesStep add up to.
type SeriesPoint struct {
	// Start is the beginning of the bucket (a multiple of SeriesStep since the
	// Unix epoch).
	Start time.Time
	// Syncs counts the syncs, Failures those that failed.
	Syncs, Failures int
	// DurationSum and DurationMax: of the syncs' durations.
	DurationSum, DurationMax time.Duration
	// Programming: the network programming latencies observed by the successful
	// syncs (kubeproxy_network_programming_duration_seconds); Count is 0 when no
	// endpoints change was programmed in the bucket.
	Programming followup.Programming
}

// DurationMean is the mean duration of the bucket's syncs.
func (p *SeriesPoint) DurationMean() time.Duration {
	if p.Syncs == 0 {
		return 0
	}
	return p.DurationSum / time.Duration(p.Syncs)
}

// ProgrammingMean is the mean network programming latency of the bucket.
func (p *SeriesPoint) ProgrammingMean() time.Duration {
	if p.Programming.Count == 0 {
		return 0
	}
	return p.Programming.Sum / time.Duration(p.Programming.Count)
}

// bucket is one slot of a Series; index is the bucket number since the epoch (a
// slot without syncs was never used).
type bucket struct {
	index int64
	point SeriesPoint
}

// Series keeps the syncs of the last SeriesSpan in SeriesLen buckets, a ring
// indexed by time: a bucket older than the span is overwritten by the first sync
// that falls in its slot. Add is called from the sync goroutine, Points from any.
type Series struct {
	mu      sync.Mutex
	buckets [SeriesLen]bucket
}

// bucketIndex is the number of the bucket that holds t: floored, so that a time
// before the epoch (a fake clock's) falls in the bucket that begins before it.
func bucketIndex(t time.Time) int64 {
	ns := t.UnixNano()
	idx := ns / int64(SeriesStep)
	if ns < 0 && ns%int64(SeriesStep) != 0 {
		idx--
	}
	return idx
}

// slot is where bucket idx lives in the ring (also before the epoch, for fake
// clocks).
func (s *Series) slot(idx int64) *bucket {
	return &s.buckets[(idx%SeriesLen+SeriesLen)%SeriesLen]
}

// Add counts the sync that started at start, took d, failed or not, and observed
// programmed.
func (s *Series) Add(start time.Time, d time.Duration, failed bool, programmed followup.Programming) {
	idx := bucketIndex(start)
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.slot(idx)
	if b.index != idx || b.point.Syncs == 0 {
		*b = bucket{index: idx, point: SeriesPoint{Start: time.Unix(0, idx*int64(SeriesStep)).UTC()}}
	}
	p := &b.point
	p.Syncs++
	if failed {
		p.Failures++
	}
	p.DurationSum += d
	p.DurationMax = max(p.DurationMax, d)
	p.Programming.Count += programmed.Count
	p.Programming.Sum += programmed.Sum
	p.Programming.Max = max(p.Programming.Max, programmed.Max)
}

// Points returns the buckets with syncs among the SeriesLen that end at now, oldest
// first.
func (s *Series) Points(now time.Time) []SeriesPoint {
	last := bucketIndex(now)
	first := last - SeriesLen + 1
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SeriesPoint, 0, SeriesLen)
	for idx := first; idx <= last; idx++ {
		if b := s.slot(idx); b.index == idx && b.point.Syncs > 0 {
			out = append(out, b.point)
		}
	}
	return out
}
