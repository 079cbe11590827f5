package ipset

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilexec "k8s.io/utils/exec"
	fakeexec "k8s.io/utils/exec/testing"
)

// scripted is one expected ipset run: its arguments, and what it prints
// and returns.
type scripted struct {
	args           string
	stdout, stderr string
	err            error
}

// fakeExec serves runs in order, failing the test on other arguments, and
// records each run's stdin.
func fakeExec(t *testing.T, runs ...scripted) (*fakeexec.FakeExec, *[]string) {
	t.Helper()
	stdins := &[]string{}
	fe := &fakeexec.FakeExec{}
	for _, r := range runs {
		fe.CommandScript = append(fe.CommandScript, func(cmd string, args ...string) utilexec.Cmd {
			if got := strings.Join(append([]string{cmd}, args...), " "); got != "ipset "+r.args {
				t.Errorf("ran %q, want %q", got, "ipset "+r.args)
			}
			fc := &fakeexec.FakeCmd{}
			fc.RunScript = []fakeexec.FakeAction{func() ([]byte, []byte, error) {
				if fc.Stdin != nil {
					b, _ := io.ReadAll(fc.Stdin)
					*stdins = append(*stdins, string(b))
				}
				return []byte(r.stdout), []byte(r.stderr), r.err
			}}
			return fakeexec.InitFakeCmd(fc, cmd, args...)
		})
	}
	t.Cleanup(func() {
		if fe.CommandCalls != len(runs) {
			t.Errorf("ran %d commands, want %d", fe.CommandCalls, len(runs))
		}
	})
	return fe, stdins
}

var exitOne = fakeexec.FakeExitError{Status: 1}

func TestExecVersion(t *testing.T) {
	fe, stdins := fakeExec(t, scripted{args: "--version", stdout: "ipset v7.19, protocol version: 7\n"})
	v, err := New(fe).Version(context.Background())
	if err != nil || v != "v7.19" {
		t.Errorf("Version = %q, %v; want v7.19", v, err)
	}
	if len(*stdins) != 1 || (*stdins)[0] != "" {
		t.Errorf("stdin = %q, want an empty one", *stdins)
	}

	fe, _ = fakeExec(t, scripted{args: "--version", stdout: "something else\n"})
	if _, err := New(fe).Version(context.Background()); err == nil {
		t.Error("Version without a version succeeded")
	}
}

const saveOutput = `create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x5e5b2ac2
add KUBE-CLUSTER-IP 10.96.0.10,udp:53
add KUBE-CLUSTER-IP 10.96.0.1,tcp:443
create KUBE-NODE-PORT-TCP bitmap:port range 0-65535
create OTHER hash:ip family inet hashsize 1024 maxelem 65536
add OTHER 192.0.2.1
`

func TestExecSaveAndEntries(t *testing.T) {
	fe, _ := fakeExec(t,
		scripted{args: "save", stdout: saveOutput},
		scripted{args: "save KUBE-CLUSTER-IP", stdout: strings.Join(strings.SplitAfter(saveOutput, "\n")[:3], "")},
		scripted{args: "save NOPE", stderr: "ipset v7.19: The set with the given name does not exist\n", err: exitOne},
		scripted{args: "list -n", stdout: "OTHER\nKUBE-CLUSTER-IP\nKUBE-NODE-PORT-TCP\n"},
	)
	s := New(fe)
	ctx := context.Background()
	all, err := s.Save(ctx)
	mustDo(t, err)
	want := map[string][]string{
		"KUBE-CLUSTER-IP":    {"10.96.0.1,tcp:443", "10.96.0.10,udp:53"},
		"KUBE-NODE-PORT-TCP": {},
		"OTHER":              {"192.0.2.1"},
	}
	if diff := cmp.Diff(want, all); diff != "" {
		t.Errorf("Save (-want +got):\n%s", diff)
	}
	entries, err := s.Entries(ctx, "KUBE-CLUSTER-IP")
	mustDo(t, err)
	if diff := cmp.Diff(want["KUBE-CLUSTER-IP"], entries); diff != "" {
		t.Errorf("Entries (-want +got):\n%s", diff)
	}
	if _, err := s.Entries(ctx, "NOPE"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Entries of a missing set = %v, want ErrNotFound with the tool's message", err)
	}
	names, err := s.ListSets(ctx)
	mustDo(t, err)
	if diff := cmp.Diff([]string{"KUBE-CLUSTER-IP", "KUBE-NODE-PORT-TCP", "OTHER"}, names); diff != "" {
		t.Errorf("ListSets (-want +got):\n%s", diff)
	}
}

func TestExecRestoreAndDestroy(t *testing.T) {
	script := "create KUBE-X hash:ip family inet hashsize 1024 maxelem 65536\nadd KUBE-X 10.0.0.1\n"
	fe, stdins := fakeExec(t,
		scripted{args: "restore -exist"},
		scripted{args: "restore -exist", stderr: "ipset v7.19: Error in line 2: Syntax error\n", err: exitOne},
		scripted{args: "destroy KUBE-X"},
		scripted{args: "destroy KUBE-Y", stderr: "ipset v7.19: The set with the given name does not exist\n", err: exitOne},
		scripted{args: "destroy KUBE-Z", stderr: "ipset v7.19: Set cannot be destroyed: it is in use by a kernel component\n", err: exitOne},
	)
	s := New(fe)
	ctx := context.Background()
	mustDo(t, s.Restore(ctx, []byte(script)))
	mustDo(t, s.Restore(ctx, nil)) // nothing to do: nothing run
	if err := s.Restore(ctx, []byte(script)); err == nil || !strings.Contains(err.Error(), "Syntax error") {
		t.Errorf("failing Restore = %v, want the tool's message", err)
	}
	if (*stdins)[0] != script {
		t.Errorf("restore stdin = %q, want the script", (*stdins)[0])
	}
	mustDo(t, s.Destroy(ctx, "KUBE-X"), s.Destroy(ctx, "KUBE-Y"))
	if err := s.Destroy(ctx, "KUBE-Z"); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("Destroy of a set in use = %v, want the tool's message", err)
	}
}

func TestParseSaveRejectsGarbage(t *testing.T) {
	for _, out := range []string{"flush X\n", "add X\n", "create X\n"} {
		if _, err := ParseSave([]byte(out)); err == nil {
			t.Errorf("ParseSave(%q) succeeded", out)
		}
	}
}
