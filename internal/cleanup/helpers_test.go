package cleanup

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/testing/golden"
)

// checkGolden is the shared expected-output check (internal/testing/golden).
var checkGolden = golden.Check

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
