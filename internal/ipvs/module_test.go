package ipvs

import (
	"context"
	"errors"
	"strings"
	"testing"

	utilexec "k8s.io/utils/exec"
	fakeexec "k8s.io/utils/exec/testing"
)

func TestLoadModule(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  string
		err  error
	}{
		{"loaded", "insmod /lib/modules/6.1.0/kernel/net/netfilter/ipvs/ip_vs.ko\n", nil},
		{"no module", "modprobe: FATAL: Module ip_vs not found in directory /lib/modules/6.18.0\n", fakeexec.FakeExitError{Status: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var argv []string
			fe := &fakeexec.FakeExec{CommandScript: []fakeexec.FakeCommandAction{
				func(cmd string, args ...string) utilexec.Cmd {
					argv = append([]string{cmd}, args...)
					fc := &fakeexec.FakeCmd{CombinedOutputScript: []fakeexec.FakeAction{
						func() ([]byte, []byte, error) { return []byte(tc.out), nil, tc.err },
					}}
					return fakeexec.InitFakeCmd(fc, cmd, args...)
				},
			}}
			err := LoadModule(context.Background(), fe)
			if got := strings.Join(argv, " "); got != "modprobe -va ip_vs" {
				t.Errorf("ran %q", got)
			}
			if tc.err == nil && err != nil {
				t.Errorf("LoadModule = %v", err)
			}
			if tc.err != nil && (!errors.Is(err, tc.err) || !strings.Contains(err.Error(), "not found in directory")) {
				t.Errorf("LoadModule = %v, want the exit status and modprobe's message", err)
			}
		})
	}
}
