package cleanup

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilexec "k8s.io/utils/exec"
	testingexec "k8s.io/utils/exec/testing"
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

// scriptResult is the scripted outcome of one command line.
type scriptResult struct {
	stdout string
	status int // exit status; 0 is success
}

// scriptExec is a utilexec.Interface answering by exact command line
// ("name arg1 arg2"); unknown command lines exit 1 with no output. It
// records every command line run.
type scriptExec struct {
	mu        sync.Mutex
	installed map[string]bool
	results   map[string]scriptResult
	calls     []string
}

var _ utilexec.Interface = (*scriptExec)(nil)

func (e *scriptExec) Command(cmd string, args ...string) utilexec.Cmd {
	line := strings.Join(append([]string{cmd}, args...), " ")
	e.mu.Lock()
	e.calls = append(e.calls, line)
	res, ok := e.results[line]
	e.mu.Unlock()
	if !ok {
		res = scriptResult{status: 1}
	}
	action := func() ([]byte, []byte, error) {
		if res.status != 0 {
			return []byte(res.stdout), nil, testingexec.FakeExitError{Status: res.status}
		}
		return []byte(res.stdout), nil, nil
	}
	fc := &testingexec.FakeCmd{
		RunScript:            []testingexec.FakeAction{action},
		CombinedOutputScript: []testingexec.FakeAction{action},
	}
	return testingexec.InitFakeCmd(fc, cmd, args...)
}

func (e *scriptExec) CommandContext(_ context.Context, cmd string, args ...string) utilexec.Cmd {
	return e.Command(cmd, args...)
}

func (e *scriptExec) LookPath(file string) (string, error) {
	if e.installed[file] {
		return "/usr/sbin/" + file, nil
	}
	return "", &os.PathError{Op: "lookpath", Path: file, Err: os.ErrNotExist}
}

func (e *scriptExec) Calls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string{}, e.calls...)
}
