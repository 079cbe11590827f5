package differential

import (
	"fmt"
	"regexp"
	"strings"
)

// OfflineDiffs compares one offline aspect of the two runs of case name.
func OfflineDiffs(name string, aspect Aspect, up, ours Result) []Difference {
	one := func(key, u, o string) []Difference {
		if u == o {
			return nil
		}
		return []Difference{{Case: name, Aspect: aspect, Key: key, Upstream: u, Ours: o}}
	}
	switch aspect {
	case AspectExit:
		return one("status", exitText(up), exitText(ours))
	case AspectStdout:
		u, o := strings.TrimSpace(up.Stdout), strings.TrimSpace(ours.Stdout)
		if fu, fo := versionInfo(u), versionInfo(o); fu != nil && fo != nil {
			// A field only one side has is reported once, in the field list.
			for k := range fu {
				if _, ok := fo[k]; !ok && k != "version.Info fields" {
					delete(fu, k)
				}
			}
			for k := range fo {
				if _, ok := fu[k]; !ok && k != "version.Info fields" {
					delete(fo, k)
				}
			}
			return DiffSets(name, aspect, fu, fo)
		}
		return one("stdout", u, o)
	case AspectFlags:
		return DiffSets(name, aspect, HelpFlags(up.Stdout), HelpFlags(ours.Stdout))
	case AspectWriteConfig:
		switch {
		case !up.WroteConfig && !ours.WroteConfig:
			return nil
		case up.WroteConfig != ours.WroteConfig:
			return one("(written)", wroteText(up), wroteText(ours))
		}
		return DiffDocuments(name, aspect, up.Written, ours.Written)
	case AspectErrors:
		fu, fo := ClassifyFailure(up), ClassifyFailure(ours)
		diffs := DiffSets(name, aspect, StrictDecodingProblems(up.Stderr), StrictDecodingProblems(ours.Stderr))
		if fu.Kind != fo.Kind {
			return append(diffs, one("kind", fu.Kind+": "+truncate(fu.Text, 300), fo.Kind+": "+truncate(fo.Text, 300))...)
		}
		return append(diffs, DiffSets(name, aspect, fu.Errors, fo.Errors)...)
	case AspectErrorFormat:
		return one("final error", ErrorFormat(up), ErrorFormat(ours))
	}
	panic(fmt.Sprintf("OfflineDiffs: aspect %q is compared elsewhere", aspect))
}

func exitText(r Result) string {
	if r.TimedOut {
		return fmt.Sprintf("still running after %s (killed)", runTimeout())
	}
	return fmt.Sprintf("exit %d", r.Exit)
}

func wroteText(r Result) string {
	if r.WroteConfig {
		return fmt.Sprintf("wrote %d bytes", len(r.Written))
	}
	return "wrote nothing"
}

// LabDiffs compares one lab aspect of the two observations of case name. Aspects
// about a running proxy are compared only when both ran (the outcome already
// differs otherwise); ok is false when the aspect was not compared.
func LabDiffs(name string, aspect Aspect, up, ours Observation) (diffs []Difference, ok bool) {
	one := func(key, u, o string) []Difference {
		if u == o {
			return nil
		}
		return []Difference{{Case: name, Aspect: aspect, Key: key, Upstream: u, Ours: o}}
	}
	bothRan := !up.Exited && !ours.Exited
	switch aspect {
	case AspectOutcome:
		return one("outcome", up.Outcome(), ours.Outcome()), true
	case AspectEvents:
		return DiffSets(name, aspect, up.Events, ours.Events), true
	case AspectConfigz:
		if !bothRan {
			return nil, false
		}
		return DiffDocuments(name, aspect, up.Configz, ours.Configz), true
	case AspectProxyMode:
		if !bothRan {
			return nil, false
		}
		return one("proxyMode", up.ProxyMode, ours.ProxyMode), true
	case AspectMetrics:
		if !bothRan {
			return nil, false
		}
		return DiffMetrics(name, up.Metrics, ours.Metrics), true
	}
	panic(fmt.Sprintf("LabDiffs: %q is not a lab aspect", aspect))
}

var versionField = regexp.MustCompile(`(\w+):"([^"]*)"`)

// versionInfo parses --version=raw output (version.Info{Major:"1", ...}) into the
// list of its fields ("version.Info fields") and each field's value, so that a
// missing field and a differing value are separate differences; nil for other text.
func versionInfo(s string) map[string]string {
	if !strings.HasPrefix(s, "version.Info{") {
		return nil
	}
	out := map[string]string{}
	var names []string
	for _, m := range versionField.FindAllStringSubmatch(s, -1) {
		names = append(names, m[1])
		out["version.Info."+m[1]] = m[2]
	}
	out["version.Info fields"] = strings.Join(names, ", ")
	return out
}
