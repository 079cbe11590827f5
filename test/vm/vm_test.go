package vm_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/kproxy/kproxy/internal/testing/roottest"
	"github.com/kproxy/kproxy/test/vm"
)

// The VM tests boot this test binary in the VM with -test.run naming the test
// itself: there InVM is true and the test plays its guest part.

// vmConfig is the configuration of kproxy-vmexec with this binary as the agent, or
// skips (fails under KPROXY_E2E_REQUIRED=1, as make test sets) when the VM cannot run.
func vmConfig(t *testing.T) vm.Config {
	t.Helper()
	roottest.Require(t, "boots a qemu VM (and creates a network namespace for its tap)", "qemu-system-x86_64", "ip")
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := vm.ConfigFromEnv(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckAssets(); err != nil {
		if os.Getenv("KPROXY_E2E_REQUIRED") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if cfg.Agent, err = os.Executable(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// selfPayload runs this test binary in the VM, only the test named, with env.
func selfPayload(t *testing.T, env ...string) vm.Payload {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return vm.Payload{Binary: self, Args: []string{"-test.run=^" + t.Name() + "$", "-test.v"}, Dir: dir, Env: env}
}

// syncBuffer is a bytes.Buffer safe for the runner's writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunStreamsAndExitCode: the payload runs in the VM (InVM, Debian's 6.1 kernel,
// the working directory of the host), its stdout and stderr come back apart, and its
// exit code is Run's.
func TestRunStreamsAndExitCode(t *testing.T) {
	if vm.InVM() {
		dir, _ := os.Getwd()
		fmt.Printf("to stdout from %s\n", dir)
		fmt.Fprintln(os.Stderr, "to stderr")
		os.Exit(3)
	}
	cfg := vmConfig(t)
	var stdout, stderr syncBuffer
	cfg.Stdout, cfg.Stderr = &stdout, &stderr
	p := selfPayload(t)
	res, err := cfg.Run(context.Background(), p)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Logf("kernel %s, up in %v, ran %v", res.KernelRelease, res.Boot, res.Run)
	if res.ExitCode != 3 {
		t.Errorf("exit code %d, want 3\nstdout:\n%s\nstderr:\n%s", res.ExitCode, stdout.String(), stderr.String())
	}
	if !strings.HasPrefix(res.KernelRelease, "6.1.") {
		t.Errorf("kernel %q, want Debian 12's 6.1", res.KernelRelease)
	}
	if want := "to stdout from " + p.Dir + "\n"; !strings.Contains(stdout.String(), want) || strings.Contains(stdout.String(), "to stderr") {
		t.Errorf("stdout %q, want %q and nothing of stderr", stdout.String(), want)
	}
	if !strings.Contains(stderr.String(), "to stderr\n") || strings.Contains(stderr.String(), "to stdout") {
		t.Errorf("stderr %q, want \"to stderr\" and nothing of stdout", stderr.String())
	}
}
