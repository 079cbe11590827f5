package drift

import (
	"fmt"
	"time"
)

// Change says how an object differs.
type Change string

const (
	// Missing: applied by kproxy, absent from the kernel.
	Missing Change = "missing"
	// Extra: in the kernel, not applied by kproxy.
	Extra Change = "extra"
	// Changed: in both, with different contents.
	Changed Change = "changed"
)

// Difference is one object that differs.
type Difference struct {
	// Kind is the kind of object: table, chain, rule, set, map, element, counter.
	Kind string `json:"kind"`
	// Name names the object (for rules and elements: the chain or set holding them).
	Name   string `json:"name,omitempty"`
	Change Change `json:"change"`
	// Detail says what differs, when the kind and name do not.
	Detail string `json:"detail,omitempty"`
}

func (d Difference) String() string {
	s := fmt.Sprintf("%s %s %s", d.Change, d.Kind, d.Name)
	if d.Detail != "" {
		s += ": " + d.Detail
	}
	return s
}

// MaxListed bounds the Differences a Report lists: a deleted table at 30,000
// Services is one difference, but a third party flushing every set could be
// thousands; the rest are counted.
const MaxListed = 100

// Report is one comparison of one family's kernel state with what was applied.
type Report struct {
	Family  string    `json:"family"`
	Checked time.Time `json:"checked"`
	// Duration of the comparison, in seconds.
	Duration float64 `json:"duration"`
	// Skipped: nothing changed in the kernel since the last comparison that found
	// no difference, so nothing was read (nftables: the ruleset generation).
	Skipped bool `json:"skipped,omitempty"`
	// Count is the number of differences; Differences lists the first MaxListed.
	Count       int          `json:"count"`
	Differences []Difference `json:"differences,omitempty"`
}

// Add records a difference.
func (r *Report) Add(d Difference) {
	r.Count++
	if len(r.Differences) < MaxListed {
		r.Differences = append(r.Differences, d)
	}
}
