package iptables

import (
	"context"
	"io"
	"os"
	"strings"
	"sync"

	utilexec "k8s.io/utils/exec"
	testingexec "k8s.io/utils/exec/testing"
)

// scriptResult is the scripted outcome of one command line.
type scriptResult struct {
	stdout string
	stderr string
	status int // exit status; 0 is success
}

// scriptExec is a utilexec.Interface answering by exact command line ("name
// arg1 arg2"); unknown command lines exit 1 with no output. It records every
// command line run and the stdin each was given.
type scriptExec struct {
	mu        sync.Mutex
	installed map[string]bool
	results   map[string]scriptResult
	calls     []string
	stdins    []string
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
	fc := &testingexec.FakeCmd{}
	run := func() ([]byte, []byte, error) {
		if fc.Stdin != nil {
			b, _ := io.ReadAll(fc.Stdin)
			e.mu.Lock()
			e.stdins = append(e.stdins, string(b))
			e.mu.Unlock()
		}
		var err error
		if res.status != 0 {
			err = testingexec.FakeExitError{Status: res.status}
		}
		var stdout, stderr []byte // nil: FakeCmd writes only non-nil output, to set writers
		if fc.Stdout != nil {
			stdout = []byte(res.stdout)
		}
		if res.stderr != "" && fc.Stderr != nil {
			stderr = []byte(res.stderr)
		}
		return stdout, stderr, err
	}
	combined := func() ([]byte, []byte, error) {
		out, _, err := run()
		return append(out, res.stderr...), nil, err
	}
	fc.RunScript = []testingexec.FakeAction{run}
	fc.CombinedOutputScript = []testingexec.FakeAction{combined}
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

func (e *scriptExec) Stdins() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string{}, e.stdins...)
}

// allInstalled has every binary of every family and backend.
func allInstalled() map[string]bool {
	m := map[string]bool{}
	for _, b := range []string{"iptables", "ip6tables"} {
		for _, v := range []string{"", "-nft", "-legacy"} {
			for _, tool := range []string{"", "-save", "-restore"} {
				m[b+v+tool] = true
			}
		}
	}
	return m
}
