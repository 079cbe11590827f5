// Package roottest is the one gate for tests that need the machine rather than
// only Go: root, network namespaces, the kernel's netfilter, conntrack or nfacct,
// and the host's binaries (ip, nft, iptables, ...).
//
// `go test -short` (make unit) is defined as the tests that need neither root nor
// the upstream binaries, so Require skips in -short mode before anything else, even
// as root: a -short run never creates a namespace or talks to the kernel's
// netfilter. Without root, or without one of the binaries, it skips too, with the
// reason, so that `go test ./...` as a user runs every pure-Go test.
package roottest

import (
	"os"
	"os/exec"
	"testing"
)

// Require skips t in -short mode, when not running as root, or when one of bins is
// not in PATH. why says what the test does with root ("creates a network namespace
// and ..."); it is part of the skip message.
func Require(t testing.TB, why string, bins ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: needs root: " + why)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: " + why)
	}
	for _, bin := range bins {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs the %s binary: %v", bin, err)
		}
	}
}
