package cleanup

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/iptables"
)

var update = flag.Bool("update", false, "rewrite the expected-output files under testdata/")

// checkGolden compares got with testdata/name, or rewrites it with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
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
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// loadFake builds a fake from one or more dumps applied in order (a second
// dump adds to the first, like a second proxier writing the same tables).
func loadFake(t *testing.T, family v1.IPFamily, files ...string) *iptables.Fake {
	t.Helper()
	f := iptables.NewFake(family)
	for _, file := range files {
		if err := f.Load(readTestdata(t, file)); err != nil {
			t.Fatalf("loading %s: %v", file, err)
		}
	}
	return f
}

// failingRestore fails the restores of one table (the input starts with
// "*table") with err, changing nothing; other calls go to the fake.
type failingRestore struct {
	*iptables.Fake
	table iptables.Table
	err   error
}

func (f failingRestore) Restore(ctx context.Context, data []byte) error {
	if strings.HasPrefix(string(data), "*"+string(f.table)+"\n") {
		return f.err
	}
	return f.Fake.Restore(ctx, data)
}

// ruleTarget returns the chain or target a rule (as iptables-save prints it
// after "-A CHAIN") jumps or goes to.
func ruleTarget(spec string) string {
	fields := strings.Fields(spec)
	for i := 0; i+1 < len(fields); i++ {
		switch fields[i] {
		case "-j", "--jump", "-g", "--goto":
			return fields[i+1]
		}
	}
	return ""
}
