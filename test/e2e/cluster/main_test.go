package cluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kproxy/kproxy/test/cluster"
	"github.com/kproxy/kproxy/test/lab/labtest"
)

// shared is the package's one cluster (2 cores: one at a time).
var shared *cluster.Cluster

var skipReason string

func repoPath(p string) string {
	abs, err := filepath.Abs(filepath.Join("..", "..", "..", p))
	if err != nil {
		return p
	}
	return abs
}

func options() cluster.Options {
	return cluster.Options{
		BinDir:    repoPath("_output/bin"),
		ImageDir:  repoPath("_output/cluster/images"),
		DeployDir: repoPath("deploy"),
		Log: func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
		},
	}
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

// OwnStepEnv: `make test` runs this package on its own, after the other packages, so
// that the cluster (1.3 GiB, both cores under the e2e load) does not share the machine
// with the other end-to-end suites; in `go test ./...` it skips.
const OwnStepEnv = "KPROXY_E2E_CLUSTER"

func run(m *testing.M) int {
	// testing.Short panics until the flags are parsed; m.Run parsing them again later
	// changes nothing.
	flag.Parse()
	if testing.Short() {
		skipReason = "-short: end-to-end, needs root and the cluster's binaries and images"
		return m.Run()
	}
	if os.Getenv(OwnStepEnv) != "1" {
		skipReason = OwnStepEnv + "!=1: make test runs this package in its own step"
		return m.Run()
	}
	opts := options()
	if err := cluster.Preflight(opts); err != nil {
		if labtest.Required() {
			fmt.Fprintf(os.Stderr, "FAIL: cluster unavailable and %s=1: %v\n", labtest.RequiredEnv, err)
			return 1
		}
		skipReason = "cluster unavailable: " + err.Error()
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := cluster.New(opts)
	if err := c.Start(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: cluster start: %v\n", err)
		return 1
	}
	shared = c
	code := m.Run()
	if code != 0 {
		c.KeepWorkDir()
		fmt.Fprintf(os.Stderr, "tests failed: keeping the cluster's work dir %s (logs)\n", c.WorkDir)
	}
	if err := c.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: cluster teardown: %v\n", err)
		code = 1
	}
	if err := c.Leftovers(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: cluster teardown left things behind: %v\n", err)
		code = 1
	}
	return code
}

func clusterFor(t *testing.T) *cluster.Cluster {
	t.Helper()
	if shared == nil {
		t.Skip(skipReason)
	}
	return shared
}
