package rendertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/testing/roottest"
)

// The renderers' kernel tests load what they rendered with the real tools of each
// iptables backend (nft and legacy) inside network namespaces they create and
// delete (named kpl-PID-TAG-N), so the machine's own rules are never touched.

var netnsSeq atomic.Int32

// Netns creates a network namespace, removed at the end of the test; tag names
// the package in it.
func Netns(t testing.TB, tag string) string {
	t.Helper()
	// The owner's PID comes first, as in the lab's names (test/lab): a lab started
	// meanwhile removes the kpl- namespaces whose owner it cannot find alive.
	name := fmt.Sprintf("kpl-%d-%s-%d", os.Getpid(), tag, netnsSeq.Add(1))
	if out, err := exec.CommandContext(context.Background(), "ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		out, err := exec.CommandContext(context.Background(), "ip", "netns", "del", name).CombinedOutput()
		if err != nil && !strings.Contains(string(out), "No such file") {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	return name
}

// RunIn runs args in the network namespace ns, with stdin when not nil, and
// returns the combined output.
func RunIn(ns string, stdin []byte, args ...string) (string, error) {
	cmd := exec.CommandContext(context.Background(), "ip", append([]string{"netns", "exec", ns}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// IptablesBinary is the binary of tool ("", "-save", "-restore") for the backend
// ("nft", "legacy") and family: "ip6tables-legacy-save".
func IptablesBinary(backend string, family v1.IPFamily, tool string) string {
	name := "iptables"
	if family == v1.IPv6Protocol {
		name = "ip6tables"
	}
	return name + "-" + backend + tool
}

// IptablesBackends returns the iptables backends usable here for family, or
// skips t (see roottest).
func IptablesBackends(t testing.TB, family v1.IPFamily) []string {
	t.Helper()
	roottest.Require(t, "loads rules with iptables-restore in private network namespaces", "ip")
	var out []string
	for _, b := range []string{"nft", "legacy"} {
		if _, err := exec.LookPath(IptablesBinary(b, family, "-restore")); err != nil {
			continue
		}
		ns := Netns(t, "probe")
		// The legacy backend needs the x_tables modules of the family.
		if _, err := RunIn(ns, nil, IptablesBinary(b, family, "-save"), "-t", "nat"); err != nil {
			t.Logf("skipping backend %s: %v", b, err)
			continue
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		t.Skip("no usable iptables backend")
	}
	return out
}

// Numbered prefixes each line of s with its number, for failures that show a
// restore input.
func Numbered(s string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = fmt.Sprintf("%4d %s", i+1, lines[i])
	}
	return strings.Join(lines, "\n")
}
