package differential

import (
	"slices"
	"strings"
	"testing"
)

// minCorpus is the least number of cases the suite is meant to carry.
const minCorpus = 60

// TestCorpusIsWellFormed needs neither root nor binaries: every case file loads,
// and the corpus covers what the suite promises (doc.go).
func TestCorpusIsWellFormed(t *testing.T) {
	cases, _ := loadInputs(t)
	if len(cases) < minCorpus {
		t.Errorf("corpus has %d cases, want at least %d", len(cases), minCorpus)
	}
	var cleanup, lab, metrics int
	for _, c := range cases {
		if c.Cleanup {
			cleanup++
		}
		if c.Lab != nil {
			lab++
			if slices.Contains(c.Lab.Compare, AspectMetrics) {
				metrics++
			}
		}
	}
	if cleanup == 0 || lab == 0 || metrics == 0 {
		t.Errorf("corpus has %d cleanup, %d lab and %d metrics cases; want some of each", cleanup, lab, metrics)
	}
	// The runnable modes whose metrics are compared: iptables, nftables, blank.
	for _, want := range []string{"kubeadm-v137", "mode-nftables", "mode-blank"} {
		i := slices.IndexFunc(cases, func(c *Case) bool { return c.Name == want })
		if i < 0 || cases[i].Lab == nil || !slices.Contains(cases[i].Lab.Compare, AspectMetrics) {
			t.Errorf("case %s (metrics in the lab) is missing", want)
		}
	}
}

func TestAllowListIsWellFormed(t *testing.T) {
	_, allow := loadInputs(t)
	for _, a := range allow {
		if a.Case != "" && !strings.ContainsAny(a.Case, "*?") {
			cases, _ := loadInputs(t)
			if !slices.ContainsFunc(cases, func(c *Case) bool { return c.Name == a.Case }) {
				t.Errorf("allow-list entry %s names no case of the corpus", a)
			}
		}
	}
}

func TestClassifyFailure(t *testing.T) {
	upstream := `E1201 11:06:21.317603   30747 run.go:72] "command failed" err="failed validate: [KubeProxyConfiguration.KubeProxyIPTablesConfiguration.MasqueradeBit: Invalid value: 40: must be within the range [0, 31], KubeProxyConfiguration.BindAddress: Invalid value: \"foo\": not a valid textual representation of an IP address]"`
	ours := `Error: failed validate: [KubeProxyConfiguration.KubeProxyIPTablesConfiguration.MasqueradeBit: Invalid value: 40: must be within the range [0, 31], KubeProxyConfiguration.BindAddress: Invalid value: "foo": not a valid textual representation of an IP address]`
	fu := ClassifyFailure(Result{Exit: 1, Stderr: upstream + "\n"})
	fo := ClassifyFailure(Result{Exit: 1, Stderr: ours + "\n"})
	want := map[string]string{
		"KubeProxyConfiguration.KubeProxyIPTablesConfiguration.MasqueradeBit": "Invalid value: 40: must be within the range [0, 31]",
		"KubeProxyConfiguration.BindAddress":                                  `Invalid value: "foo": not a valid textual representation of an IP address`,
	}
	for _, f := range []Failure{fu, fo} {
		if f.Kind != "validation" || len(f.Errors) != len(want) {
			t.Fatalf("got %+v, want validation errors %v", f, want)
		}
		for k, v := range want {
			if f.Errors[k] != v {
				t.Errorf("%s: got %q, want %q", k, f.Errors[k], v)
			}
		}
	}
	if got := ErrorFormat(Result{Exit: 1, Stderr: upstream}); !strings.HasPrefix(got, "klog") {
		t.Errorf("ErrorFormat(upstream) = %q", got)
	}
	if got := ErrorFormat(Result{Exit: 1, Stderr: ours}); !strings.HasPrefix(got, "plain") {
		t.Errorf("ErrorFormat(ours) = %q", got)
	}
	flag := ClassifyFailure(Result{Exit: 1, Stderr: "Error: unknown flag: --nope\nUsage:\n  kube-proxy [flags]\n"})
	if flag.Kind != "flag" || flag.Errors["flag"] != "unknown flag: --nope" {
		t.Errorf("flag error: %+v", flag)
	}
}

func TestDiffDocuments(t *testing.T) {
	a := []byte("mode: iptables\nlist: [a, b]\nblock:\n  x: 1\n  gone: null\n")
	b := []byte("mode: nftables\nlist: [a, b]\nblock:\n  x: 1\n  added: 2\n")
	got := map[string]string{}
	for _, d := range DiffDocuments("c", AspectWriteConfig, a, b) {
		got[d.Key] = d.Upstream + " -> " + d.Ours
	}
	want := map[string]string{"mode": `"iptables" -> "nftables"`, "block.gone": "null -> " + absent, "block.added": absent + " -> 2"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
}

func TestLedgerFindsStaleEntries(t *testing.T) {
	allow := []Allowance{
		{Case: "a-*", Aspect: AspectExit, Differs: "x", Reason: "r"},
		{Case: "b", Aspect: AspectExit, Differs: "x", Reason: "r"},
		{Case: "c", Aspect: AspectExit, Differs: "x", Reason: "r"},
		{Metric: "rest_client_*", Aspect: AspectMetrics, Differs: "x", Reason: "r"},
	}
	l := NewLedger(allow)
	if un, _ := l.Record("a-1", AspectExit, []Difference{{Case: "a-1", Aspect: AspectExit, Key: "status"}}); len(un) != 0 {
		t.Errorf("a-1 not allowed: %v", un)
	}
	l.Record("b", AspectExit, nil)
	if un, _ := l.Record("m", AspectMetrics, []Difference{{Case: "m", Aspect: AspectMetrics, Key: "go_goroutines"}}); len(un) != 1 {
		t.Errorf("go_goroutines allowed: %v", un)
	}
	stale, unjudged := l.Stale()
	if len(stale) != 2 || stale[0].Case != "b" || stale[1].Metric != "rest_client_*" {
		t.Errorf("stale = %v, want the entries for b and rest_client_*", stale)
	}
	if len(unjudged) != 1 || unjudged[0].Case != "c" {
		t.Errorf("unjudged = %v, want the entry for c", unjudged)
	}
}

func TestConntrackMax(t *testing.T) {
	for _, tc := range []struct{ perCore, min, cpus, want int64 }{
		{0, 131072, 2, 0},
		{32768, 131072, 2, 131072},
		{32768, 131072, 8, 262144},
		{1 << 20, 0, 4, 1 << 20},
	} {
		if got := conntrackMax(tc.perCore, tc.min, tc.cpus); got != tc.want {
			t.Errorf("conntrackMax(%d, %d, %d) = %d, want %d", tc.perCore, tc.min, tc.cpus, got, tc.want)
		}
	}
}

func TestStrictDecodingProblems(t *testing.T) {
	stderr := `I1201 11:32:55.034491   25334 options.go:502] "Using lenient decoding as strict decoding failed" err=<
	strict decoding error: yaml: unmarshal errors:
	  line 5: key "mode" already set in map, unknown field "noSuchField"
 >`
	got := StrictDecodingProblems(stderr)
	for _, want := range []string{`strict decoding: key "mode" already set`, `strict decoding: unknown field "noSuchField"`} {
		if _, ok := got[want]; !ok {
			t.Errorf("StrictDecodingProblems lacks %s: %v", want, got)
		}
	}
	if len(got) != 2 {
		t.Errorf("got %v, want 2 problems", got)
	}
}

// TestCaseCheckKeepsOfflineRunsOffline: no offline input may reach an API server.
func TestCaseCheckKeepsOfflineRunsOffline(t *testing.T) {
	for _, c := range []Case{
		{Name: "x", About: "x", Args: []string{"--master=https://10.0.0.1"}, Compare: []Aspect{AspectExit}},
		{Name: "x", About: "x", Args: []string{"--kubeconfig=/etc/kubernetes/admin.conf"}, Compare: []Aspect{AspectExit}},
		{Name: "x", About: "x", Args: []string{"--config={{config}}"}, Compare: []Aspect{AspectExit},
			Config: "clientConnection:\n  kubeconfig: /etc/kubernetes/admin.conf\n"},
		{Name: "x", About: "x", Args: []string{"--config={{config}}"}, Compare: []Aspect{AspectExit},
			Config: `{"clientConnection": {"kubeconfig": "/root/.kube/config"}}`},
	} {
		if err := c.check("x"); err == nil {
			t.Errorf("case %+v passed the check", c)
		}
	}
	ok := Case{Name: "x", About: "x", Args: []string{"--config={{config}}"}, Compare: []Aspect{AspectExit},
		Config: "clientConnection:\n  kubeconfig: " + KubeadmKubeconfig + "\n"}
	if err := ok.check("x"); err != nil {
		t.Errorf("kubeadm's kubeconfig path refused: %v", err)
	}
}
