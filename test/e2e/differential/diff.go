package differential

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// absent stands for a value one side does not have.
const absent = "<absent>"

// DiffDocuments compares two YAML (or JSON) documents structurally: maps by key, lists
// of equal length element by element, everything else by value. It returns one
// difference per differing leaf, keyed by its path (a.b[0].c). A document that does
// not parse is compared as text under the key "(document)".
func DiffDocuments(name string, aspect Aspect, upstream, ours []byte) []Difference {
	var u, o any
	uerr := yaml.Unmarshal(upstream, &u)
	oerr := yaml.Unmarshal(ours, &o)
	if uerr != nil || oerr != nil {
		if string(upstream) == string(ours) {
			return nil
		}
		return []Difference{{Case: name, Aspect: aspect, Key: "(document)",
			Upstream: describeDoc(upstream, uerr), Ours: describeDoc(ours, oerr)}}
	}
	var out []Difference
	diffValues("", u, o, func(path string, u, o string) {
		out = append(out, Difference{Case: name, Aspect: aspect, Key: path, Upstream: u, Ours: o})
	})
	return out
}

func describeDoc(b []byte, err error) string {
	if err != nil {
		return fmt.Sprintf("unparsable (%v): %q", err, truncate(string(b), 200))
	}
	return truncate(string(b), 200)
}

func diffValues(path string, u, o any, report func(path, u, o string)) {
	um, uok := u.(map[string]any)
	om, ook := o.(map[string]any)
	if uok && ook {
		keys := map[string]bool{}
		for k := range um {
			keys[k] = true
		}
		for k := range om {
			keys[k] = true
		}
		for _, k := range sortedKeys(keys) {
			p := k
			if path != "" {
				p = path + "." + k
			}
			uv, uin := um[k]
			ov, oin := om[k]
			switch {
			case !uin:
				report(p, absent, render(ov))
			case !oin:
				report(p, render(uv), absent)
			default:
				diffValues(p, uv, ov, report)
			}
		}
		return
	}
	ul, uok := u.([]any)
	ol, ook := o.([]any)
	if uok && ook && len(ul) == len(ol) {
		for i := range ul {
			diffValues(fmt.Sprintf("%s[%d]", path, i), ul[i], ol[i], report)
		}
		return
	}
	if r1, r2 := render(u), render(o); r1 != r2 {
		if path == "" {
			path = "(document)"
		}
		report(path, r1, r2)
	}
}

func render(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// DiffSets reports the members of two sets that only one side has, keyed by member.
func DiffSets(name string, aspect Aspect, upstream, ours map[string]string) []Difference {
	var out []Difference
	keys := map[string]bool{}
	for k := range upstream {
		keys[k] = true
	}
	for k := range ours {
		keys[k] = true
	}
	for _, k := range sortedKeys(keys) {
		u, uin := upstream[k]
		o, oin := ours[k]
		switch {
		case !uin:
			out = append(out, Difference{Case: name, Aspect: aspect, Key: k, Upstream: absent, Ours: o})
		case !oin:
			out = append(out, Difference{Case: name, Aspect: aspect, Key: k, Upstream: u, Ours: absent})
		case u != o:
			out = append(out, Difference{Case: name, Aspect: aspect, Key: k, Upstream: u, Ours: o})
		}
	}
	return out
}

// Failure is how a run failed, as far as it can be compared: the kind of failure
// and, for the kinds whose wording is upstream's contract, the messages.
type Failure struct {
	// Kind is none, flag (the command line did not parse), args (positional
	// arguments), decode (the config file could not be read or decoded), complete (feature gates
	// and the hostname override, checked while completing the options), logging (the
	// logging block, checked when logging is set up), validation (the configuration
	// is invalid) or runtime (anything later).
	Kind string
	// Errors maps each validation error's field path (KubeProxyConfiguration.<...>)
	// or, for flag and args failures, "flag"/"args" to its message.
	Errors map[string]string
	// Text is the error as printed, for the report.
	Text string
}

var (
	// klogLine is a klog header: severity, date, time, pid, file:line.
	klogLine = regexp.MustCompile(`^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [^ \]]+\] (.*)$`)
	// klogErr is the quoted err field of a structured klog line.
	klogErr = regexp.MustCompile(`\berr="((?:[^"\\]|\\.)*)"`)
	// fieldPath starts one validation error of a field.ErrorList aggregate: a path of
	// the configuration, or of its logging block as the logging set-up (which runs
	// before validation) reports it.
	fieldPath = regexp.MustCompile(`\b(KubeProxyConfiguration(\.[A-Za-z0-9_\[\]]+)*|logging(\.[A-Za-z0-9_\[\]]+)+): `)
	// decodeError is a config file that could not be read or decoded.
	decodeError = regexp.MustCompile(`decod|no kind|Object 'Kind' is missing|unexpected config type|open .*: no such file`)
	flagError   = regexp.MustCompile(`^(unknown flag|unknown shorthand flag|invalid argument|flag needs an argument|bad flag syntax|invalid value)`)
)

// errorTexts returns the errors a run printed: the err field of klog error lines
// and the text of "Error: " lines (cobra's and plain-printed errors).
func errorTexts(stderr string) []string {
	var out []string
	for _, line := range strings.Split(stderr, "\n") {
		if m := klogLine.FindStringSubmatch(line); m != nil {
			if m[1] != "E" && m[1] != "F" {
				continue
			}
			if e := klogErr.FindStringSubmatch(m[2]); e != nil {
				if s, err := strconv.Unquote(`"` + e[1] + `"`); err == nil {
					out = append(out, s)
					continue
				}
				out = append(out, e[1])
				continue
			}
			out = append(out, m[2])
			continue
		}
		if rest, ok := strings.CutPrefix(line, "Error: "); ok {
			out = append(out, rest)
		}
	}
	return out
}

// ClassifyFailure reads how a run failed from its exit status and stderr.
func ClassifyFailure(r Result) Failure {
	texts := errorTexts(r.Stderr)
	f := Failure{Kind: "none", Errors: map[string]string{}, Text: strings.Join(texts, " | ")}
	if r.Exit == 0 && !r.TimedOut {
		return f
	}
	all := strings.Join(texts, "\n")
	// Upstream checks in phases, each with its own wrapping: the config file and the
	// feature gates while completing the options ("failed complete: "), the logging
	// block when setting up logging ("initialize logging: "), then the whole
	// configuration ("failed validate: "). The phase is part of what is compared.
	phase := "validation"
	switch {
	case strings.Contains(all, "failed complete:"):
		phase = "complete"
	case strings.Contains(all, "initialize logging:"):
		phase = "logging"
	}
	for _, t := range texts {
		for path, msg := range validationErrors(t) {
			f.Kind = phase
			f.Errors[path] = msg
		}
	}
	if f.Kind != "none" {
		return f
	}
	switch {
	case len(texts) > 0 && flagError.MatchString(texts[0]):
		f.Kind = "flag"
		f.Errors["flag"] = texts[0]
	case strings.Contains(all, "does not take any arguments"):
		f.Kind = "args"
		f.Errors["args"] = texts[0]
	case decodeError.MatchString(all):
		// The decoder's words are apimachinery's; only the kind is compared.
		f.Kind = "decode"
	case phase != "validation":
		f.Kind = phase
		for _, t := range texts {
			for _, prefix := range []string{"failed complete: ", "initialize logging: "} {
				if _, msg, ok := strings.Cut(t, prefix); ok {
					f.Errors[phase] = msg
				}
			}
		}
	default:
		f.Kind = "runtime"
	}
	return f
}

var strictProblem = regexp.MustCompile(`unknown field "[^"]*"|key "[^"]*" already set|duplicate field "[^"]*"`)

// StrictDecodingProblems returns what strict decoding of the config file found
// (unknown fields, duplicate keys) as a run reported it, whether it then went on
// leniently or failed: an operator reads these warnings to fix the file.
func StrictDecodingProblems(stderr string) map[string]string {
	out := map[string]string{}
	if !strings.Contains(stderr, "strict decoding error") {
		return out
	}
	for _, p := range strictProblem.FindAllString(stderr, -1) {
		out["strict decoding: "+p] = "reported"
	}
	return out
}

// validationErrors splits one printed field.ErrorList (one error, or "[e1, e2]") into
// field path -> message.
func validationErrors(text string) map[string]string {
	locs := fieldPath.FindAllStringIndex(text, -1)
	if len(locs) == 0 {
		return nil
	}
	out := map[string]string{}
	for i, loc := range locs {
		end := len(text)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		msg := strings.TrimSpace(text[loc[1]:end])
		msg = strings.TrimSuffix(msg, ",")
		if i+1 == len(locs) {
			msg = strings.TrimSuffix(msg, "]")
		}
		path := strings.TrimSuffix(text[loc[0]:loc[1]], ": ")
		// One path can carry several errors (a host and a port): keep them all.
		if prev, ok := out[path]; ok && prev != msg {
			msg = prev + " | " + msg
		}
		out[path] = msg
	}
	return out
}

// ErrorFormat is how a failed run printed its final error: klog ("command failed"
// as an error log line), plain ("Error: ..."), either followed by the usage text, or
// none.
func ErrorFormat(r Result) string {
	if r.Exit == 0 {
		return "none (exit 0)"
	}
	form := "none"
	for _, line := range strings.Split(r.Stderr, "\n") {
		if m := klogLine.FindStringSubmatch(line); m != nil && m[1] == "E" && strings.HasPrefix(m[2], `"command failed"`) {
			form = `klog error line "command failed" err=...`
		} else if strings.HasPrefix(line, "Error: ") {
			form = `plain "Error: ..." line`
		}
	}
	if strings.Contains(r.Stderr, "\nUsage:\n") || strings.HasPrefix(r.Stderr, "Usage:\n") {
		form += " and the usage"
	}
	return form
}

var helpFlag = regexp.MustCompile(`(?m)^\s+(?:-[a-zA-Z], )?--([a-z0-9][a-z0-9-]*)`)

// HelpFlags returns the flag names a --help text lists, with their first help line.
func HelpFlags(help string) map[string]string {
	out := map[string]string{}
	for _, m := range helpFlag.FindAllStringSubmatch(help, -1) {
		out["--"+m[1]] = "listed"
	}
	return out
}
