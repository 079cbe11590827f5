package prober

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// MaxErrorSamples is how many of a window's first failures a TargetSummary keeps.
const MaxErrorSamples = 5

// Summary is what a prober observed during one window (see the package contract).
type Summary struct {
	Prober  string          `json:"prober,omitempty"` // the prober's name (its location)
	Window  int             `json:"window"`           // 0 from Run, +1 per Reset; -1 in a Merge of different windows
	Start   time.Time       `json:"start"`
	End     time.Time       `json:"end"`
	Rate    float64         `json:"rate,omitempty"` // probes per second per target
	Timeout Duration        `json:"timeout,omitempty"`
	Targets []TargetSummary `json:"targets"`
}

// TargetSummary is one target's part of a Summary.
type TargetSummary struct {
	Target    string `json:"target"`
	Attempts  int    `json:"attempts"`
	Successes int    `json:"successes"`
	Failures  int    `json:"failures"`
	// Pending probes were launched in or before this window and are not counted yet:
	// in flight, or completed behind one in flight.
	Pending       int            `json:"pending,omitempty"`
	FirstErrors   []ProbeError   `json:"firstErrors,omitempty"` // the first MaxErrorSamples failures
	LastError     *ProbeError    `json:"lastError,omitempty"`
	LongestOutage Outage         `json:"longestOutage"`
	OutageOpen    bool           `json:"outageOpen,omitempty"` // the last counted probe failed
	LastSuccess   time.Time      `json:"lastSuccess,omitzero"` // start of the last successful probe
	Backends      map[string]int `json:"backends,omitempty"`   // reply (hostname) -> probes it answered
}

// ProbeError is one failed probe: when it started and why it failed.
type ProbeError struct {
	Time  time.Time `json:"time"`
	Error string    `json:"error"`
}

// Outage is an interval during which no probe of a target succeeded (see the package
// contract). The zero Outage is no outage.
type Outage struct {
	Duration Duration  `json:"duration"`
	From     time.Time `json:"from,omitzero"` // start of the last success before it (perhaps in an earlier window), or of Run
	To       time.Time `json:"to,omitzero"`   // start of the next success, or the end of the window if Open
	Open     bool      `json:"open,omitempty"`
}

func (o Outage) String() string {
	if o.Duration == 0 {
		return "none"
	}
	s := time.Duration(o.Duration).Round(time.Millisecond).String()
	if o.Open {
		s += " (open)"
	}
	return s
}

// Duration is a time.Duration that reads and writes JSON as a string ("1.5s"); it
// also reads a number of nanoseconds.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if nerr := json.Unmarshal(b, &n); nerr != nil {
			return fmt.Errorf("duration: want a string such as \"1.5s\" or nanoseconds, got %s", b)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

func (d Duration) String() string { return time.Duration(d).String() }

// Target returns the summary of the target named name (its URL), if present.
func (s Summary) Target(name string) (TargetSummary, bool) {
	for _, t := range s.Targets {
		if t.Target == name {
			return t, true
		}
	}
	return TargetSummary{}, false
}

// Failures is the number of failed probes over every target.
func (s Summary) Failures() int {
	n := 0
	for _, t := range s.Targets {
		n += t.Failures
	}
	return n
}

// LongestOutage is the longest outage over every target.
func (s Summary) LongestOutage() Outage {
	var o Outage
	for _, t := range s.Targets {
		if t.LongestOutage.Duration > o.Duration {
			o = t.LongestOutage
		}
	}
	return o
}

// Merge combines summaries, of one prober's successive windows or of several probers:
// targets with the same URL are combined (counts and backends add up, the longest
// outage is the longest of theirs, the first errors are the earliest ones), in the
// order they first appear. Start is the earliest, End the latest; Prober joins the
// distinct names with "+"; Window, Rate and Timeout are kept when all agree (Window is
// -1 otherwise, Rate and Timeout 0). An outage that spans two windows is not joined
// across them (each window reports its part; see the package contract).
func Merge(summaries ...Summary) Summary {
	var out Summary
	if len(summaries) == 0 {
		return out
	}
	out.Window, out.Rate, out.Timeout = summaries[0].Window, summaries[0].Rate, summaries[0].Timeout
	var names []string
	index := map[string]int{}
	for _, s := range summaries {
		if s.Prober != "" && !slices.Contains(names, s.Prober) {
			names = append(names, s.Prober)
		}
		if out.Start.IsZero() || (!s.Start.IsZero() && s.Start.Before(out.Start)) {
			out.Start = s.Start
		}
		if s.End.After(out.End) {
			out.End = s.End
		}
		if s.Window != out.Window {
			out.Window = -1
		}
		if s.Rate != out.Rate {
			out.Rate = 0
		}
		if s.Timeout != out.Timeout {
			out.Timeout = 0
		}
		for _, t := range s.Targets {
			i, ok := index[t.Target]
			if !ok {
				index[t.Target] = len(out.Targets)
				out.Targets = append(out.Targets, TargetSummary{Target: t.Target})
				i = len(out.Targets) - 1
			}
			out.Targets[i] = mergeTarget(out.Targets[i], t)
		}
	}
	out.Prober = strings.Join(names, "+")
	return out
}

func mergeTarget(a, b TargetSummary) TargetSummary {
	a.Attempts += b.Attempts
	a.Successes += b.Successes
	a.Failures += b.Failures
	a.Pending += b.Pending
	a.FirstErrors = append(slices.Clone(a.FirstErrors), b.FirstErrors...)
	slices.SortStableFunc(a.FirstErrors, func(x, y ProbeError) int { return x.Time.Compare(y.Time) })
	if len(a.FirstErrors) > MaxErrorSamples {
		a.FirstErrors = a.FirstErrors[:MaxErrorSamples]
	}
	if len(a.FirstErrors) == 0 {
		a.FirstErrors = nil
	}
	if b.LastError != nil && (a.LastError == nil || b.LastError.Time.After(a.LastError.Time)) {
		e := *b.LastError
		a.LastError = &e
	}
	if b.LongestOutage.Duration > a.LongestOutage.Duration {
		a.LongestOutage = b.LongestOutage
	}
	a.OutageOpen = a.OutageOpen || b.OutageOpen
	if b.LastSuccess.After(a.LastSuccess) {
		a.LastSuccess = b.LastSuccess
	}
	if len(b.Backends) > 0 {
		m := make(map[string]int, len(a.Backends)+len(b.Backends))
		for k, v := range a.Backends {
			m[k] += v
		}
		for k, v := range b.Backends {
			m[k] += v
		}
		a.Backends = m
	}
	return a
}
