package vmsuite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/test/lab"
	"github.com/kproxy/kproxy/test/lab/labtest"
	"github.com/kproxy/kproxy/test/vm"
)

// OwnStepEnv: make test runs the suites in the VM in their own step, in the kernel
// matrix (hack/vm-test.sh), so that the VM (two emulated CPUs) does not share the
// machine with the other end-to-end suites; in `go test ./...` they skip.
const OwnStepEnv = "KPROXY_E2E_VM"

// Suite is one end-to-end test package run in the VM against the host's API server.
type Suite struct {
	// Package is the test package built for the VM, relative to the module root
	// ("./test/e2e/nftables/").
	Package string
	// Run is its -test.run pattern.
	Run string
	// Timeout bounds the suite in the VM (its own -test.timeout).
	Timeout time.Duration
	// Env is more of the suite's environment; the external control plane's, the
	// packed kube-proxy's path (KPROXY_PROXY_BIN) and KPROXY_E2E_REQUIRED=1 are set.
	Env []string
	// Files are more files packed for it (kube-proxy always is, at GuestProxy).
	Files []vm.File
	// Lab is a started host lab whose node1 runs the API server; nil starts one
	// without pods for the run.
	Lab *lab.Lab
}

// GuestProxy is where the packed kube-proxy (KPROXY_PROXY_BIN) is in the VM.
const GuestProxy = "/kproxy/kube-proxy"

// RunInVM runs s in the 6.1 VM (see the package documentation): it skips t outside
// the VM step (OwnStepEnv), and without root, the VM's assets, qemu or the
// kube-proxy binary (fails it instead under KPROXY_E2E_REQUIRED=1); it fails t when
// the suite fails in the VM.
func RunInVM(t *testing.T, s Suite) {
	t.Helper()
	if os.Getenv(OwnStepEnv) != "1" {
		t.Skip(OwnStepEnv + "!=1: make test runs this in its own step (hack/vm-test.sh)")
	}
	labOpts := lab.Options{Node1Pods: -1, Node2Pods: -1}
	labtest.SkipUnlessAvailable(t, labOpts)
	root := moduleRoot(t)
	cfg, err := vm.ConfigFromEnv(root)
	if err != nil {
		t.Fatal(err)
	}
	proxyBin := os.Getenv("KPROXY_PROXY_BIN")
	if proxyBin == "" {
		proxyBin = filepath.Join(root, "_output", "bin", "kube-proxy")
	}
	files := append([]vm.File{{Host: proxyBin, Guest: GuestProxy}}, s.Files...)
	if err := prerequisites(cfg, files); err != nil {
		if labtest.Required() {
			t.Fatalf("%v (and %s=1)", err, labtest.RequiredEnv)
		}
		t.Skip(err)
	}
	if cfg.Agent, err = os.Executable(); err != nil {
		t.Fatal(err)
	}

	suiteBin := filepath.Join(t.TempDir(), filepath.Base(s.Package)+".test")
	build := exec.Command("go", "test", "-c", "-o", suiteBin, s.Package)
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", s.Package, err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), s.Timeout+5*time.Minute)
	defer cancel()
	l := s.Lab
	if l == nil {
		l = lab.New(labOpts)
		stop := l.CloseOnSignal()
		defer stop()
		if err := l.Start(ctx); err != nil {
			t.Fatalf("starting the host's lab (the API server): %v", err)
		}
		t.Cleanup(func() {
			if err := l.Close(); err != nil {
				t.Errorf("closing the host's lab: %v", err)
			}
		})
		t.Logf("host lab %s: API server up in %s", l.ID, l.Timings.APIServer.Round(time.Millisecond))
	}

	ext := l.ExternalForVM()
	cfg.Net = &vm.Network{Netns: l.Node1.NS.Name, Guest: lab.VMUplinkGuest, Host: lab.VMUplinkHost}
	cfg.Stdout, cfg.Stderr = os.Stdout, os.Stderr
	cfg.Timeout = s.Timeout + 45*time.Second
	env := append(ext.Env(), labtest.RequiredEnv+"=1", "KPROXY_PROXY_BIN="+GuestProxy)
	res, err := cfg.Run(ctx, vm.Payload{
		Binary: suiteBin,
		Args:   []string{"-test.run", s.Run, "-test.v", "-test.count=1", "-test.timeout", s.Timeout.String()},
		Dir:    filepath.Join(root, strings.TrimPrefix(filepath.Clean(s.Package), "./")),
		Env:    append(env, s.Env...),
		Files:  files,
	})
	if err != nil {
		t.Fatalf("%s in the VM: %v", s.Package, err)
	}
	t.Logf("VM kernel %s: booted in %s, %s ran %s", res.KernelRelease, res.Boot.Round(time.Second), s.Package, res.Run.Round(time.Second))
	if res.ExitCode != 0 {
		t.Fatalf("%s failed in the VM (exit code %d; its output is above)", s.Package, res.ExitCode)
	}
}

// prerequisites says what the VM run lacks here, or nil.
func prerequisites(cfg vm.Config, files []vm.File) error {
	if err := cfg.CheckAssets(); err != nil {
		return err
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		return fmt.Errorf("no qemu-system-x86_64 (hack/setup.sh installs it): %w", err)
	}
	for _, f := range files {
		if st, err := os.Stat(f.Host); err != nil || st.IsDir() {
			return fmt.Errorf("no %s to pack for the VM (hack/build.sh builds kube-proxy, hack/build-tools.sh the upstream binaries; KPROXY_PROXY_BIN overrides kube-proxy's path)", f.Host)
		}
	}
	return nil
}

// moduleRoot is the directory of the module's go.mod, above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := vm.ModuleRoot(wd)
	if err != nil || root == "" {
		t.Fatalf("no go.mod above %s (%v)", wd, err)
	}
	return root
}
