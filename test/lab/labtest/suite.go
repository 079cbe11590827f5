package labtest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/kproxy/kproxy/test/lab"
)

// RequiredEnv makes unavailable e2e prerequisites a failure instead of a skip.
const RequiredEnv = "KPROXY_E2E_REQUIRED"

// Required reports whether RequiredEnv is set to 1.
func Required() bool { return os.Getenv(RequiredEnv) == "1" }

// shortReason is why every lab test skips in -short mode, RequiredEnv or not: -short
// (make unit) is the tests that need neither root nor the upstream binaries.
const shortReason = "-short: end-to-end, needs root, network namespaces and the lab's binaries"

// short reports whether the run is in -short mode. TestMain runs before the testing
// package parses its flags, and testing.Short panics until they are parsed; m.Run
// parsing them again later changes nothing.
func short() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	return testing.Short()
}

// Suite holds the lab shared by a test package.
type Suite struct {
	Options lab.Options
	// StartTimeout bounds lab start (default 3 minutes).
	StartTimeout time.Duration

	lab        *lab.Lab
	skipReason string
}

// Main is the body of TestMain: os.Exit(suite.Main(m)).
func (s *Suite) Main(m *testing.M) int {
	if short() {
		s.skipReason = shortReason
		return m.Run()
	}
	// In the test VM the suite uses the host's API server (lab.ExternalFromEnv).
	ext, err := lab.ExternalFromEnv()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	if ext != nil {
		s.Options.External = ext
	}
	if err := lab.Preflight(s.Options); err != nil {
		if Required() {
			fmt.Fprintf(os.Stderr, "FAIL: lab unavailable and %s=1: %v\n", RequiredEnv, err)
			return 1
		}
		s.skipReason = "lab unavailable: " + err.Error()
		return m.Run()
	}
	timeout := s.StartTimeout
	if timeout <= 0 {
		timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	l := lab.New(s.Options)
	stopSignals := l.CloseOnSignal()
	defer stopSignals()
	if err := l.Start(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: lab start: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "lab %s started in %s (network %s, etcd %s, apiserver %s; work dir %s)\n",
		l.ID, l.StartDuration.Round(time.Millisecond), l.Timings.Network.Round(time.Millisecond),
		l.Timings.Etcd.Round(time.Millisecond), l.Timings.APIServer.Round(time.Millisecond), l.WorkDir)
	s.lab = l

	code := m.Run()
	if code != 0 {
		l.KeepWorkDir()
		fmt.Fprintf(os.Stderr, "tests failed: keeping lab work dir %s (logs)\n", l.WorkDir)
	}
	if err := l.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: lab teardown: %v\n", err)
		code = 1
	}
	if err := l.Leftovers(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: lab teardown left things behind: %v\n", err)
		code = 1
	}
	return code
}

// Lab returns the shared lab, or skips t with the reason it is unavailable.
func (s *Suite) Lab(t testing.TB) *lab.Lab {
	t.Helper()
	if s.lab == nil {
		reason := s.skipReason
		if reason == "" {
			reason = "lab not started (is TestMain calling Suite.Main?)"
		}
		t.Skip(reason)
	}
	return s.lab
}

// SkipUnlessAvailable skips t (or fails it under RequiredEnv) when a lab with opts
// cannot run here, and skips it in -short mode. For tests that start their own lab.
func SkipUnlessAvailable(t testing.TB, opts lab.Options) {
	t.Helper()
	if short() {
		t.Skip(shortReason)
	}
	if err := lab.Preflight(opts); err != nil {
		if Required() {
			t.Fatalf("lab unavailable and %s=1: %v", RequiredEnv, err)
		}
		t.Skip("lab unavailable: " + err.Error())
	}
}
