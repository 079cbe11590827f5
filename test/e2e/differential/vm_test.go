package differential

import (
	"os"
	"testing"
	"time"

	"github.com/kproxy/kproxy/test/e2e/vmsuite"
	"github.com/kproxy/kproxy/test/vm"
)

// guestUpstream is where the upstream binary is packed in the VM.
const guestUpstream = "/kproxy/kube-proxy-upstream"

// vmTimeout bounds TestDifferential's VM share in the VM (its cases are few: the
// ipvs mode's --cleanup with live state and its lab runs).
const vmTimeout = 6 * time.Minute

// TestDifferentialInVM runs the corpus' VM cases (vm: true) in the test VM with
// Debian 12's kernel, which has IPVS: TestDifferential runs there (it picks the VM
// cases by itself, runsHere) with both binaries packed and this host's lab's API
// server over a tap. Like test/e2e/vmsuite, only in hack/vm-test.sh's step
// (KPROXY_E2E_VM=1).
func TestDifferentialInVM(t *testing.T) {
	if vm.InVM() {
		t.Skip("the host's half: in the VM, TestDifferential runs the VM cases")
	}
	// Checked first (RunInVM checks it again): outside the VM step nothing is needed.
	if os.Getenv(vmsuite.OwnStepEnv) != "1" {
		t.Skip(vmsuite.OwnStepEnv + "!=1: make test runs this in its own step (hack/vm-test.sh)")
	}
	l := suite.Lab(t)
	up, _ := binaries(t)
	vmsuite.RunInVM(t, vmsuite.Suite{
		Package: "./test/e2e/differential/",
		Run:     "^TestDifferential$",
		Timeout: vmTimeout,
		Env:     []string{UpstreamBinEnv + "=" + guestUpstream},
		Files:   []vm.File{{Host: up.Path, Guest: guestUpstream}},
		Lab:     l,
	})
}
