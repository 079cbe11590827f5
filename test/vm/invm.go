package vm

import (
	"os"
	"slices"
	"strings"
)

// cmdlineFlag is on the VM kernel's command line (Run puts it there): the one mark
// of the VM that no environment or working directory can fake or lose.
const cmdlineFlag = "kproxy.vm=1"

// InVM reports whether this process runs in a kproxy test VM.
func InVM() bool {
	b, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return false
	}
	return slices.Contains(strings.Fields(string(b)), cmdlineFlag)
}
