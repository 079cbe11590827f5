package bench

import (
	"os/exec"
	"testing"
	"time"
)

// A child's CPU counts while the child still runs, not only once reaped.
func TestProcCPUCountsLiveChildren(t *testing.T) {
	// The parent shell waits for a child that burns CPU, then sleeps until killed.
	cmd := exec.Command("sh", "-c", `sh -c 'i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done; sleep 60' & wait`)
	if err := cmd.Start(); err != nil {
		t.Skipf("no sh: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	parent := cmd.Process.Pid

	const want = 0.3 // CPU seconds the child has burnt before the check
	deadline := time.Now().Add(30 * time.Second)
	for {
		children := procChildren(parent)
		if len(children) == 1 {
			if own, err := statCPU(children[0]); err == nil && own >= want {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child of %d did not burn %.1f CPU seconds within 30s (children %v)", parent, want, children)
		}
		time.Sleep(20 * time.Millisecond)
	}
	self, err := statCPU(parent)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ProcCPU(parent)
	if err != nil {
		t.Fatal(err)
	}
	if self >= want || got < want {
		t.Errorf("ProcCPU(parent) = %.2fs with the parent's own %.2fs; want at least the live child's %.1fs", got, self, want)
	}
}
