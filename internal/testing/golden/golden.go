// Package golden is the expected-output check of kproxy's tests: a test compares
// what it produced with a file under its package's testdata/, and `go test
// -update` rewrites the files instead (then review them with git diff). It is for
// tests only; the -update flag is registered once per test binary that imports it.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the expected-output files under testdata/ instead of comparing")

// Updating reports whether the test binary runs with -update.
func Updating() bool { return *update }

// Check compares got with testdata/name, or rewrites that file with -update.
func Check(t testing.TB, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s (run with -update to create it): %v", path, err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got; run with -update to accept):\n%s", path, diff)
	}
}

// Name turns a test case's name into a file name with the extension ext (".nft"):
// lower case, spaces and slashes as dashes.
func Name(caseName, ext string) string {
	return strings.NewReplacer(" ", "-", "/", "-").Replace(strings.ToLower(caseName)) + ext
}
