package vmsuite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kproxy/kproxy/test/lab"
	"github.com/kproxy/kproxy/test/lab/labtest"
	"github.com/kproxy/kproxy/test/vm"
)

// RunEnv overrides DefaultRun; ModeEnv the mode (ipvs by default: iptables or
// nftables compare a finding with the other modes on the same kernel).
const (
	RunEnv  = "KPROXY_VMSUITE_RUN"
	ModeEnv = "KPROXY_VMSUITE_MODE"
)

// OwnStepEnv: make test runs this package on its own, in the kernel matrix
// (hack/vm-test.sh), so that the VM (two emulated CPUs) does not share the machine
// with the other end-to-end suites; in `go test ./...` it skips.
const OwnStepEnv = "KPROXY_E2E_VM"

// DefaultRun is the suite's tests run in ipvs mode in the VM: every one that
// concerns ipvs mode, from pods, from the node and from outside, the proxy's
// restarts and the switch to nftables mode and back. Not run: the tests of
// nftables- or iptables-only behaviour (they skip in ipvs mode anyway), the status
// page (no Chromium in the VM), and TestDrift and TestTrace: kproxy's ipvs mode
// has neither drift detection nor `kube-proxy trace` yet (docs/ipvs.md).
const DefaultRun = "^(TestClusterIP|TestClusterIPNamedTargetPort|TestNoEndpoints|TestClusterIPFromNode|TestStaleUDPConntrack|TestExplain|TestNodePort|TestLoadBalancer|TestExternalTrafficPolicyLocal|TestNodePortAddresses|TestLocalhostNodePorts|TestModeSwitch|TestLifecycle|TestHairpin|TestMasqueradeAndLocalDetectors|TestSessionAffinityClientIP|TestInternalTrafficPolicyLocal|TestSessionAffinitySurvivesRestart|TestTopology|TestTerminatingFallback)$"

// suiteTimeout bounds the suite in the VM (its own -test.timeout).
const suiteTimeout = 25 * time.Minute

// TestIPVSSuiteInVM runs the e2e suite in ipvs mode in the 6.1 VM against this
// host's API server (see the package documentation).
func TestIPVSSuiteInVM(t *testing.T) {
	if os.Getenv(OwnStepEnv) != "1" {
		t.Skip(OwnStepEnv + "!=1: make test runs this package in its own step (hack/vm-test.sh)")
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
	if err := prerequisites(cfg, proxyBin); err != nil {
		if labtest.Required() {
			t.Fatalf("%v (and %s=1)", err, labtest.RequiredEnv)
		}
		t.Skip(err)
	}
	if cfg.Agent, err = os.Executable(); err != nil {
		t.Fatal(err)
	}

	suiteBin := filepath.Join(t.TempDir(), "nftables.test")
	build := exec.Command("go", "test", "-c", "-o", suiteBin, "./test/e2e/nftables/")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the e2e suite: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), suiteTimeout+5*time.Minute)
	defer cancel()
	l := lab.New(labOpts)
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

	ext := l.ExternalForVM()
	cfg.Net = &vm.Network{Netns: l.Node1.NS.Name, Guest: lab.VMUplinkGuest, Host: lab.VMUplinkHost}
	cfg.Stdout, cfg.Stderr = os.Stdout, os.Stderr
	cfg.Timeout = suiteTimeout + 45*time.Second
	run := os.Getenv(RunEnv)
	if run == "" {
		run = DefaultRun
	}
	mode := os.Getenv(ModeEnv)
	if mode == "" {
		mode = "ipvs"
	}
	const guestProxy = "/kproxy/kube-proxy"
	res, err := cfg.Run(ctx, vm.Payload{
		Binary: suiteBin,
		Args:   []string{"-test.run", run, "-test.v", "-test.count=1", "-test.timeout", suiteTimeout.String()},
		Dir:    filepath.Join(root, "test", "e2e", "nftables"),
		Env: append(ext.Env(),
			"KPROXY_E2E_MODE="+mode,
			labtest.RequiredEnv+"=1",
			"KPROXY_PROXY_BIN="+guestProxy,
		),
		Files: []vm.File{{Host: proxyBin, Guest: guestProxy}},
	})
	if err != nil {
		t.Fatalf("the suite in the VM: %v", err)
	}
	t.Logf("VM kernel %s: booted in %s, the suite ran %s", res.KernelRelease, res.Boot.Round(time.Second), res.Run.Round(time.Second))
	if res.ExitCode != 0 {
		t.Fatalf("the e2e suite in ipvs mode failed in the VM (exit code %d; its output is above)", res.ExitCode)
	}
}

// prerequisites says what the VM run lacks here, or nil.
func prerequisites(cfg vm.Config, proxyBin string) error {
	if err := cfg.CheckAssets(); err != nil {
		return err
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		return fmt.Errorf("no qemu-system-x86_64 (hack/setup.sh installs it): %w", err)
	}
	if st, err := os.Stat(proxyBin); err != nil || st.IsDir() {
		return fmt.Errorf("no kube-proxy binary at %s (hack/build.sh builds it; KPROXY_PROXY_BIN overrides the path)", proxyBin)
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
