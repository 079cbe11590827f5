package differential

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"
)

// AllowListPath is the one file listing every intended difference.
const AllowListPath = "testdata/allowed-differences.yaml"

// PendingPrefix starts the reason of a difference that is not intended but known and
// being fixed: the entry goes once the fix lands (the suite then reports it stale).
const PendingPrefix = "PENDING:"

// Allowance is one entry of the allow-list: the differences it matches are accepted.
type Allowance struct {
	// Case is a glob (* and ?) over case names; empty means every case.
	Case string `json:"case,omitempty"`
	// Metric is a glob over metric family names, for the metrics aspect (the
	// difference's key); it is the same as Key there.
	Metric string `json:"metric,omitempty"`
	// Aspect is the aspect compared (exit, writeConfig, events, metrics, ...); empty
	// means every aspect of the matching cases.
	Aspect Aspect `json:"aspect,omitempty"`
	// Key is a glob over the difference's key: a field path of a configuration, an
	// event's reason/type, a validation error's path; empty means any.
	Key string `json:"key,omitempty"`
	// Differs says what differs, in words.
	Differs string `json:"differs"`
	// Reason is why an operator can accept the difference.
	Reason string `json:"reason"`
}

func (a Allowance) String() string {
	var sel []string
	if a.Case != "" {
		sel = append(sel, "case "+a.Case)
	}
	if a.Metric != "" {
		sel = append(sel, "metric "+a.Metric)
	}
	if a.Aspect != "" {
		sel = append(sel, "aspect "+string(a.Aspect))
	}
	if a.Key != "" {
		sel = append(sel, "key "+a.Key)
	}
	return "{" + strings.Join(sel, ", ") + ": " + a.Differs + "}"
}

func (a Allowance) key() string {
	if a.Metric != "" {
		return a.Metric
	}
	return a.Key
}

// inScope reports whether the entry is about aspect of case name.
func (a Allowance) inScope(name string, aspect Aspect) bool {
	return (a.Aspect == "" || a.Aspect == aspect) && globMatch(a.Case, name)
}

// VMOnly reports whether the entry is about VM cases only: its case glob matches
// some case and every case it matches has vm: true. The VM's run of TestDifferential
// judges such entries (it compares only the VM cases), the run outside it the others.
func (a Allowance) VMOnly(cases []*Case) bool {
	matched := false
	for _, c := range cases {
		if globMatch(a.Case, c.Name) {
			if !c.VM {
				return false
			}
			matched = true
		}
	}
	return matched
}

func (a Allowance) matches(d Difference) bool {
	return a.inScope(d.Case, d.Aspect) && globMatch(a.key(), d.Key)
}

// LoadAllowList reads and checks the allow-list.
func LoadAllowList(path string) ([]Allowance, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var list []Allowance
	if err := yaml.UnmarshalStrict(b, &list); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var errs []error
	for i, a := range list {
		where := fmt.Sprintf("%s: entry %d %s", path, i+1, a)
		switch {
		case a.Aspect != "" && !slices.Contains(offlineAspects, a.Aspect) && !slices.Contains(labAspects, a.Aspect):
			errs = append(errs, fmt.Errorf("%s: unknown aspect %q", where, a.Aspect))
		case a.Case == "" && a.Metric == "":
			errs = append(errs, fmt.Errorf("%s: names neither a case nor a metric", where))
		case a.Metric != "" && (a.Aspect != AspectMetrics || a.Key != ""):
			errs = append(errs, fmt.Errorf("%s: metric goes with aspect metrics and no key", where))
		case strings.TrimSpace(a.Differs) == "":
			errs = append(errs, fmt.Errorf("%s: differs is empty", where))
		case strings.TrimSpace(strings.TrimPrefix(a.Reason, PendingPrefix)) == "":
			errs = append(errs, fmt.Errorf("%s: reason is empty", where))
		}
	}
	return list, errors.Join(errs...)
}

// Difference is one way the binaries disagree on a case.
type Difference struct {
	Case   string
	Aspect Aspect
	// Key locates the difference within the aspect (a field path, a metric, an event).
	Key            string
	Upstream, Ours string
}

func (d Difference) String() string {
	return fmt.Sprintf("case %s, aspect %s, key %s:\n      upstream: %s\n      kproxy:   %s", d.Case, d.Aspect, d.Key, d.Upstream, d.Ours)
}

// Ledger records what was compared and what differed, so that allow-list entries
// that no longer match anything are found. Safe for concurrent use.
type Ledger struct {
	mu       sync.Mutex
	allow    []Allowance
	used     []bool
	compared map[string]bool // case + "\x00" + aspect
	found    []Difference
}

// NewLedger starts an empty ledger over the allow-list.
func NewLedger(allow []Allowance) *Ledger {
	return &Ledger{allow: allow, used: make([]bool, len(allow)), compared: map[string]bool{}}
}

// Record notes that aspect of case name was compared with the given differences and
// returns those no entry allows. The allowed ones are returned as explained, with
// their entries, for the log.
func (l *Ledger) Record(name string, aspect Aspect, diffs []Difference) (unexplained []Difference, explained []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.compared[name+"\x00"+string(aspect)] = true
	for _, d := range diffs {
		l.found = append(l.found, d)
		hit := -1
		for i, a := range l.allow {
			if a.matches(d) {
				l.used[i] = true
				if hit < 0 {
					hit = i
				}
			}
		}
		if hit < 0 {
			unexplained = append(unexplained, d)
			continue
		}
		explained = append(explained, fmt.Sprintf("%s\n      allowed by %s (%s)", d, l.allow[hit], l.allow[hit].Reason))
	}
	return unexplained, explained
}

// Stale returns the entries that are about something compared but matched no
// difference: the difference is gone and the entry must go too. Entries about
// nothing compared in this run (a -run filter, a skipped phase) are not judged and
// are returned as unjudged.
func (l *Ledger) Stale() (stale []Allowance, unjudged []Allowance) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, a := range l.allow {
		if l.used[i] {
			continue
		}
		judged := false
		for k := range l.compared {
			name, aspect, _ := strings.Cut(k, "\x00")
			if a.inScope(name, Aspect(aspect)) {
				judged = true
				break
			}
		}
		if judged {
			stale = append(stale, a)
		} else {
			unjudged = append(unjudged, a)
		}
	}
	return stale, unjudged
}

// Found returns every difference recorded, sorted, for the summary.
func (l *Ledger) Found() []Difference {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.found)
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Case != b.Case {
			return a.Case < b.Case
		}
		if a.Aspect != b.Aspect {
			return a.Aspect < b.Aspect
		}
		return a.Key < b.Key
	})
	return out
}

// globMatch matches s against a pattern where * is any run of characters and ? any
// one; the empty pattern matches everything.
func globMatch(pattern, s string) bool {
	if pattern == "" {
		return true
	}
	var re strings.Builder
	re.WriteString("^")
	for _, r := range pattern {
		switch r {
		case '*':
			re.WriteString(".*")
		case '?':
			re.WriteString(".")
		default:
			re.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	re.WriteString("$")
	return regexp.MustCompile(re.String()).MatchString(s)
}
