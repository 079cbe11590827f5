package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// E2E runs upstream's e2e binary (hack/tools/e2enetwork, linking only sig-network)
// with the ginkgo CLI, from the client namespace, against the cluster.
type E2E struct {
	Cluster *Cluster
	// Binary is the e2e test binary, Ginkgo the ginkgo CLI (default: in BinDir).
	Binary, Ginkgo string
	// Procs is ginkgo's parallelism (default 4, as measured on 2 cores).
	Procs int
}

func (e *E2E) defaults() {
	if e.Binary == "" {
		e.Binary = filepath.Join(e.Cluster.opts.BinDir, "e2e-network.test")
	}
	if e.Ginkgo == "" {
		e.Ginkgo = filepath.Join(e.Cluster.opts.BinDir, "ginkgo")
	}
	if e.Procs == 0 {
		e.Procs = 4
	}
}

// testArgs are the e2e framework's flags for this cluster.
func (e *E2E) testArgs(reportDir string) []string {
	c := e.Cluster
	return []string{
		"--provider=local",
		"--kubeconfig=" + c.KubeconfigPath,
		"--kubectl-path=" + filepath.Join(c.opts.BinDir, "kubectl"),
		"--report-dir=" + reportDir,
		"--e2e-output-dir=" + reportDir,
		"--dump-logs-on-failure=false",
		"--num-nodes=" + strconv.Itoa(len(c.Workers)),
		"--node-os-distro=debian",
	}
}

// ListSpecs lists every spec of the e2e binary (a ginkgo dry run; nothing touches the
// cluster).
func (e *E2E) ListSpecs(ctx context.Context, dir string) ([]Spec, error) {
	e.defaults()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	report := filepath.Join(dir, dryRunReport)
	cmd := exec.CommandContext(ctx, e.Binary, "--ginkgo.dry-run", "--ginkgo.json-report="+report, "--ginkgo.no-color")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		if _, serr := os.Stat(report); serr != nil {
			return nil, fmt.Errorf("e2e dry run: %w: %s", err, tail(string(out), 20))
		}
	}
	return ReadSpecListing(dir)
}

// dryRunReport is the file in ListSpecs' dir that holds the dry run's report.
const dryRunReport = "dry-run.json"

// ReadSpecListing reads the spec listing that ListSpecs left in dir.
func ReadSpecListing(dir string) ([]Spec, error) {
	specs, _, err := ReadGinkgoReport(filepath.Join(dir, dryRunReport))
	return specs, err
}

// Run runs specs with ginkgo and returns each one's result; the JSON and JUnit reports
// and the output are kept in dir. A spec that fails is a result, not an error: the
// error is for a run that could not happen or produced no report.
func (e *E2E) Run(ctx context.Context, dir string, specs []Spec) ([]SpecResult, error) {
	e.defaults()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "ginkgo.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	args := []string{
		"--procs=" + strconv.Itoa(e.Procs),
		"--no-color",
		"--timeout=3h",
		"--output-dir=" + dir,
		"--json-report=report.json",
		"--junit-report=junit.xml",
		"--focus=" + FocusRegexp(specs),
		e.Binary, "--",
	}
	args = append(args, e.testArgs(dir)...)
	cmd := e.Cluster.Client.NS.Command(ctx, e.Ginkgo, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = log, log
	// Interrupted (Ctrl-C, a deadline), ginkgo gets SIGINT, as from a terminal: it stops
	// the specs, runs their cleanup and writes the reports of what ran.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 2 * time.Minute
	runErr := cmd.Run()
	results, err := ReadRunResults(dir, specs)
	if err != nil {
		return nil, fmt.Errorf("ginkgo wrote no report (%w); see %s: %w", runErr, log.Name(), err)
	}
	return results, nil
}

// ReadRunResults reads the results of specs from the report that Run wrote in dir.
func ReadRunResults(dir string, specs []Spec) ([]SpecResult, error) {
	_, all, err := ReadGinkgoReport(filepath.Join(dir, "report.json"))
	if err != nil {
		return nil, err
	}
	// The report lists every spec of the binary; the others are "skipped" by the focus.
	want := make(map[string]bool, len(specs))
	for _, s := range specs {
		want[s.Name] = true
	}
	var results []SpecResult
	for _, r := range all {
		if want[r.Name] {
			results = append(results, r)
		}
	}
	return results, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
