package nftnetlink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/testing/roottest"
)

// needRoot skips tests that need root and the nft and ip binaries (and every such
// test in -short mode).
func needRoot(t testing.TB) {
	t.Helper()
	roottest.Require(t, "programs nftables in private network namespaces", "nft", "ip")
}

// testNetns creates a named network namespace, deleted when the test ends (also on
// failure), and returns its name.
func testNetns(t testing.TB) string {
	t.Helper()
	var r [4]byte
	_, _ = rand.Read(r[:])
	name := "kpn-" + hex.EncodeToString(r[:])
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", name, err, out)
		}
	})
	return name
}

func netnsPath(name string) string { return filepath.Join("/run/netns", name) }

// nftIn runs nft with args in the namespace.
func nftIn(ns string, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(context.Background(), "ip", append([]string{"netns", "exec", ns, "nft"}, args...)...)
	if stdin != "" {
		f, err := os.CreateTemp("", "kpn-*.nft")
		if err != nil {
			return "", err
		}
		defer os.Remove(f.Name())
		if _, err := f.WriteString(stdin); err != nil {
			return "", err
		}
		f.Close()
		cmd.Args = append(cmd.Args, "-f", f.Name())
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// oneText is a batch of one transaction text.
func oneText(text string) iter.Seq[string] { return slices.Values([]string{text}) }

// testExecutor returns a private network namespace (root only, deleted with the
// test) and an IPv4 executor of table kube-proxy in it.
func testExecutor(t *testing.T) (string, *Executor) {
	t.Helper()
	needRoot(t)
	ns := testNetns(t)
	ex, err := New(knftables.IPv4Family, "kube-proxy", Options{NetNSPath: netnsPath(ns)})
	if err != nil {
		t.Fatal(err)
	}
	return ns, ex
}
