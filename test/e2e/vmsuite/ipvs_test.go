package vmsuite

import (
	"os"
	"testing"
	"time"
)

// RunEnv overrides DefaultRun; ModeEnv the mode (ipvs by default: iptables or
// nftables compare a finding with the other modes on the same kernel).
const (
	RunEnv  = "KPROXY_VMSUITE_RUN"
	ModeEnv = "KPROXY_VMSUITE_MODE"
)

// DefaultRun is the suite's tests run in ipvs mode in the VM: every one that
// concerns ipvs mode, from pods, from the node and from outside, the proxy's
// restarts, drift detection and repair, `kube-proxy trace`, and the switch to
// nftables mode and back. Not run: the tests of nftables- or iptables-only
// behaviour (they skip in ipvs mode anyway) and the status page (no Chromium in the
// VM).
const DefaultRun = "^(TestClusterIP|TestClusterIPNamedTargetPort|TestNoEndpoints|TestClusterIPFromNode|TestStaleUDPConntrack|TestExplain|TestNodePort|TestLoadBalancer|TestExternalTrafficPolicyLocal|TestNodePortAddresses|TestLocalhostNodePorts|TestModeSwitch|TestLifecycle|TestHairpin|TestMasqueradeAndLocalDetectors|TestSessionAffinityClientIP|TestInternalTrafficPolicyLocal|TestSessionAffinitySurvivesRestart|TestTopology|TestTerminatingFallback|TestDrift|TestTrace)$"

// TestIPVSSuiteInVM runs the e2e suite in ipvs mode in the 6.1 VM against this
// host's API server (see the package documentation).
func TestIPVSSuiteInVM(t *testing.T) {
	run := os.Getenv(RunEnv)
	if run == "" {
		run = DefaultRun
	}
	mode := os.Getenv(ModeEnv)
	if mode == "" {
		mode = "ipvs"
	}
	RunInVM(t, Suite{
		Package: "./test/e2e/nftables/",
		Run:     run,
		Timeout: 25 * time.Minute,
		Env:     []string{"KPROXY_E2E_MODE=" + mode},
	})
}

// ShortRun is the subset of the suite run in nftables and in iptables mode on the
// VM's 6.1 kernel, so that the paths kproxy takes on kernels before 6.2 (a chain
// deleted in a later transaction than its last map element; render/nftables'
// PlanOptions.DeferChainDeletes) and iptables on that kernel carry real traffic:
// Services created, their endpoints changed and removed, Services deleted. (The
// restarts of TestLifecycle, 2 minutes there, are not kernel-specific: they run in
// ipvs mode in TestIPVSSuiteInVM.)
const ShortRun = "^(TestClusterIP|TestNodePort|TestNoEndpoints|TestTopology|TestTerminatingFallback)$"

// TestShortSuiteOn61 runs ShortRun in nftables mode, then in iptables mode, each in
// its own VM. A run aimed with RunEnv or ModeEnv is TestIPVSSuiteInVM's alone.
func TestShortSuiteOn61(t *testing.T) {
	if os.Getenv(RunEnv) != "" || os.Getenv(ModeEnv) != "" {
		t.Skipf("%s or %s aims the run at TestIPVSSuiteInVM", RunEnv, ModeEnv)
	}
	for _, mode := range []string{"nftables", "iptables"} {
		t.Run(mode, func(t *testing.T) {
			RunInVM(t, Suite{
				Package: "./test/e2e/nftables/",
				Run:     ShortRun,
				Timeout: 10 * time.Minute,
				Env:     []string{"KPROXY_E2E_MODE=" + mode},
			})
		})
	}
}
