package vmsuite

import (
	"os"
	"testing"

	"github.com/kproxy/kproxy/test/vm"
)

// This test binary is its own agent in the VM (vm.IsAgent): /init runs it first,
// and it runs the suite's binary as the payload.
func TestMain(m *testing.M) {
	vm.RunAgentIfAgent()
	os.Exit(m.Run())
}
