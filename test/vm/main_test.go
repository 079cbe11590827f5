package vm_test

import (
	"os"
	"testing"

	"github.com/kproxy/kproxy/test/vm"
)

// The test binary is its own agent in the VM: the VM tests boot it with itself as
// the payload, and /init runs it as the agent first.
func TestMain(m *testing.M) {
	vm.RunAgentIfAgent()
	os.Exit(m.Run())
}
