package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// pollInterval is how often the cluster's waits look again.
const pollInterval = 250 * time.Millisecond

// runHost runs a program (which may enter namespaces itself: ip netns exec, nsenter)
// and returns its combined output; the error carries the output.
func runHost(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// runArgv is runHost for a command line built as one slice (nsenter or ctr wrappers).
func runArgv(ctx context.Context, argv []string) (string, error) {
	return runHost(ctx, argv[0], argv[1:]...)
}
