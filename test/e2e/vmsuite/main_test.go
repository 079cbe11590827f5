package vmsuite

import (
	"context"
	"os"
	"testing"

	"github.com/kproxy/kproxy/test/vm"
)

// This test binary is its own agent in the VM (vm.IsAgent): /init runs it first,
// and it runs the suite's binary as the payload.
func TestMain(m *testing.M) {
	if vm.IsAgent() {
		os.Exit(vm.Agent(context.Background()))
	}
	os.Exit(m.Run())
}
