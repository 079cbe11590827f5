package iptables

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"
)

var jump = []string{"-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES"}

const jumpLine = "-m comment --comment kubernetes service portals -j KUBE-SERVICES"

func TestExecCommandLines(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name      string
		family    v1.IPFamily
		backend   Backend
		installed map[string]bool
		results   map[string]scriptResult
		run       func(e *Exec) error
		wantErr   string // substring; "" means success
		want      []string
	}{
		{
			name: "restore with the bounded lock wait", family: v1.IPv4Protocol, backend: BackendNFT, installed: allInstalled(),
			results: map[string]scriptResult{"iptables-nft-restore -w 5 -W 100000 --noflush --counters": {}},
			run:     func(e *Exec) error { return e.Restore(ctx, []byte("*nat\nCOMMIT\n*filter\nCOMMIT\n")) },
			want:    []string{"iptables-nft-restore -w 5 -W 100000 --noflush --counters"},
		},
		{
			name: "restore falls back to the plain binary", family: v1.IPv6Protocol, backend: BackendLegacy, installed: map[string]bool{"ip6tables-restore": true},
			results: map[string]scriptResult{"ip6tables-restore -w 5 -W 100000 --noflush --counters": {}},
			run:     func(e *Exec) error { return e.Restore(ctx, []byte("*nat\nCOMMIT\n")) },
			want:    []string{"ip6tables-restore -w 5 -W 100000 --noflush --counters"},
		},
		{
			name: "plain backend", family: v1.IPv4Protocol, backend: BackendPlain, installed: allInstalled(),
			results: map[string]scriptResult{"iptables -w 5 -S POSTROUTING -t nat": {}},
			run: func(e *Exec) error {
				if !e.Present(ctx) {
					return errors.New("not present")
				}
				return nil
			},
			want: []string{"iptables -w 5 -S POSTROUTING -t nat"},
		},
		{
			name: "absent family", family: v1.IPv6Protocol, backend: BackendNFT, installed: allInstalled(),
			run: func(e *Exec) error {
				if e.Present(ctx) {
					return errors.New("present")
				}
				return nil
			},
			want: []string{"ip6tables-nft -w 5 -S POSTROUTING -t nat"},
		},
		{
			name: "ensure chain creates", family: v1.IPv4Protocol, backend: BackendLegacy, installed: allInstalled(),
			results: map[string]scriptResult{"iptables-legacy -w 5 -N KUBE-PROXY-CANARY -t mangle": {}},
			run: func(e *Exec) error {
				existed, err := e.EnsureChain(ctx, TableMangle, CanaryChain)
				if err == nil && existed {
					return errors.New("existed")
				}
				return err
			},
			want: []string{"iptables-legacy -w 5 -N KUBE-PROXY-CANARY -t mangle"},
		},
		{
			name: "ensure chain that exists", family: v1.IPv4Protocol, backend: BackendLegacy, installed: allInstalled(),
			results: map[string]scriptResult{"iptables-legacy -w 5 -N KUBE-PROXY-CANARY -t mangle": {stderr: "iptables: Chain already exists.", status: 1}},
			run: func(e *Exec) error {
				existed, err := e.EnsureChain(ctx, TableMangle, CanaryChain)
				if err == nil && !existed {
					return errors.New("did not exist")
				}
				return err
			},
			want: []string{"iptables-legacy -w 5 -N KUBE-PROXY-CANARY -t mangle"},
		},
		{
			name: "ensure chain fails on a lock timeout", family: v1.IPv4Protocol, backend: BackendNFT, installed: allInstalled(),
			results: map[string]scriptResult{"iptables-nft -w 5 -N KUBE-PROXY-CANARY -t mangle": {stderr: "Another app is currently holding the xtables lock. Stopped waiting after 5s.", status: 4}},
			run: func(e *Exec) error {
				_, err := e.EnsureChain(ctx, TableMangle, CanaryChain)
				if err != nil && !IsResourceError(err) {
					return errors.New("not a resource error: " + err.Error())
				}
				return err
			},
			wantErr: "Stopped waiting after 5s",
			want:    []string{"iptables-nft -w 5 -N KUBE-PROXY-CANARY -t mangle"},
		},
		{
			name: "chain exists and absent", family: v1.IPv4Protocol, backend: BackendNFT, installed: allInstalled(),
			results: map[string]scriptResult{"iptables-nft -w 5 -S KUBE-SERVICES -t nat": {stdout: "-N KUBE-SERVICES"}},
			run: func(e *Exec) error {
				if ok, err := e.ChainExists(ctx, TableNAT, "KUBE-SERVICES"); !ok || err != nil {
					return errors.New("KUBE-SERVICES not found")
				}
				if ok, err := e.ChainExists(ctx, TableFilter, "KUBE-SERVICES"); ok || err != nil {
					return errors.New("filter KUBE-SERVICES found")
				}
				return nil
			},
			want: []string{"iptables-nft -w 5 -S KUBE-SERVICES -t nat", "iptables-nft -w 5 -S KUBE-SERVICES -t filter"},
		},
		{
			name: "ensure rule appends when absent", family: v1.IPv6Protocol, backend: BackendNFT, installed: allInstalled(),
			results: map[string]scriptResult{"ip6tables-nft -w 5 -A OUTPUT -t nat " + jumpLine: {}},
			run: func(e *Exec) error {
				existed, err := e.EnsureRule(ctx, false, TableNAT, ChainOutput, jump...)
				if err == nil && existed {
					return errors.New("existed")
				}
				return err
			},
			want: []string{"ip6tables-nft -w 5 -C OUTPUT -t nat " + jumpLine, "ip6tables-nft -w 5 -A OUTPUT -t nat " + jumpLine},
		},
		{
			name: "ensure rule prepends when absent", family: v1.IPv4Protocol, backend: BackendNFT, installed: allInstalled(),
			results: map[string]scriptResult{"iptables-nft -w 5 -I OUTPUT -t nat " + jumpLine: {}},
			run: func(e *Exec) error {
				_, err := e.EnsureRule(ctx, true, TableNAT, ChainOutput, jump...)
				return err
			},
			want: []string{"iptables-nft -w 5 -C OUTPUT -t nat " + jumpLine, "iptables-nft -w 5 -I OUTPUT -t nat " + jumpLine},
		},
		{
			name: "ensure rule that exists", family: v1.IPv4Protocol, backend: BackendNFT, installed: allInstalled(),
			results: map[string]scriptResult{"iptables-nft -w 5 -C OUTPUT -t nat " + jumpLine: {}},
			run: func(e *Exec) error {
				existed, err := e.EnsureRule(ctx, true, TableNAT, ChainOutput, jump...)
				if err == nil && !existed {
					return errors.New("did not exist")
				}
				return err
			},
			want: []string{"iptables-nft -w 5 -C OUTPUT -t nat " + jumpLine},
		},
		{
			name: "ensure rule with a bad command line fails", family: v1.IPv4Protocol, backend: BackendNFT, installed: allInstalled(),
			results: map[string]scriptResult{"iptables-nft -w 5 -C OUTPUT -t nat " + jumpLine: {stderr: "iptables v1.8.9 (nf_tables): unknown option", status: 2}},
			run: func(e *Exec) error {
				_, err := e.EnsureRule(ctx, true, TableNAT, ChainOutput, jump...)
				return err
			},
			wantErr: "unknown option",
			want:    []string{"iptables-nft -w 5 -C OUTPUT -t nat " + jumpLine},
		},
		{
			name: "absent rule is not an error", family: v1.IPv6Protocol, backend: BackendLegacy, installed: allInstalled(),
			run:  func(e *Exec) error { return e.DeleteRule(ctx, TableNAT, ChainPrerouting, jump...) },
			want: []string{"ip6tables-legacy -w 5 -C PREROUTING -t nat " + jumpLine},
		},
		{
			name: "missing target chain is not an error", family: v1.IPv4Protocol, backend: BackendLegacy, installed: allInstalled(),
			results: map[string]scriptResult{
				"iptables-legacy -w 5 -C PREROUTING -t nat " + jumpLine: {
					stderr: "iptables v1.8.9 (legacy): Couldn't load target `KUBE-SERVICES':No such file or directory", status: 2},
			},
			run:  func(e *Exec) error { return e.DeleteRule(ctx, TableNAT, ChainPrerouting, jump...) },
			want: []string{"iptables-legacy -w 5 -C PREROUTING -t nat " + jumpLine},
		},
		{
			name: "flush and delete chain", family: v1.IPv6Protocol, backend: BackendPlain, installed: allInstalled(),
			results: map[string]scriptResult{
				"ip6tables -w 5 -F KUBE-SERVICES -t nat": {},
				"ip6tables -w 5 -X KUBE-SERVICES -t nat": {},
				"ip6tables -w 5 -X KUBE-GONE -t nat":     {stderr: "ip6tables: No chain/target/match by that name.", status: 1},
			},
			run: func(e *Exec) error {
				if err := e.FlushChain(ctx, TableNAT, "KUBE-SERVICES"); err != nil {
					return err
				}
				if err := e.DeleteChain(ctx, TableNAT, "KUBE-SERVICES"); err != nil {
					return err
				}
				return e.DeleteChain(ctx, TableNAT, "KUBE-GONE")
			},
			want: []string{"ip6tables -w 5 -F KUBE-SERVICES -t nat", "ip6tables -w 5 -X KUBE-SERVICES -t nat", "ip6tables -w 5 -X KUBE-GONE -t nat"},
		},
		{
			name: "delete chain failure without a not-found message", family: v1.IPv6Protocol, backend: BackendPlain, installed: allInstalled(),
			results: map[string]scriptResult{"ip6tables -w 5 -X KUBE-PROXY-CANARY -t mangle": {stderr: "ip6tables: Directory not empty.", status: 1}},
			run:     func(e *Exec) error { return e.DeleteChain(ctx, TableMangle, CanaryChain) },
			wantErr: "Directory not empty",
			want:    []string{"ip6tables -w 5 -X KUBE-PROXY-CANARY -t mangle"},
		},
		{
			name: "flush of an absent chain fails", family: v1.IPv4Protocol, backend: BackendNFT, installed: allInstalled(),
			results: map[string]scriptResult{"iptables-nft -w 5 -F KUBE-GONE -t nat": {stderr: "iptables: No chain/target/match by that name.", status: 1}},
			run:     func(e *Exec) error { return e.FlushChain(ctx, TableNAT, "KUBE-GONE") },
			wantErr: "No chain/target/match by that name",
			want:    []string{"iptables-nft -w 5 -F KUBE-GONE -t nat"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exec := &scriptExec{installed: tc.installed, results: tc.results}
			err := tc.run(New(exec, tc.family, tc.backend))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, exec.Calls()); diff != "" {
				t.Errorf("commands (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExecRestoreInputAndError(t *testing.T) {
	const input = "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-NOPE -j ACCEPT\nCOMMIT\n"
	exec := &scriptExec{installed: allInstalled(), results: map[string]scriptResult{
		"iptables-nft-restore -w 5 -W 100000 --noflush --counters": {
			stderr: "Ignoring deprecated --wait-interval option.\niptables-nft-restore: line 3 failed: No chain/target/match by that name.\n", status: 1},
	}}
	err := New(exec, v1.IPv4Protocol, BackendNFT).Restore(context.Background(), []byte(input))
	var re *RestoreError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T) is not a *RestoreError", err, err)
	}
	if re.Line != 3 || re.Command != "iptables-nft-restore" || !strings.Contains(err.Error(), "line 3 failed: No chain/target/match") {
		t.Errorf("RestoreError = %+v (%q)", re, err)
	}
	var exitErr utilexec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 1 {
		t.Errorf("error does not wrap the exit status: %v", err)
	}
	if got := exec.Stdins(); len(got) != 1 || got[0] != input {
		t.Errorf("stdin = %q, want %q", got, input)
	}
	if got, want := Lines([]byte(input), re.Line, 1, 1), "2: :KUBE-SERVICES - [0:0]\n3: -A KUBE-NOPE -j ACCEPT\n4: COMMIT\n"; got != want {
		t.Errorf("Lines = %q, want %q", got, want)
	}
}

func TestRestoreErrorLine(t *testing.T) {
	for out, want := range map[string]int{
		"iptables-restore: line 51 failed":                                         51,
		"iptables-nft-restore: line 6 failed: No chain/target/match by that name.": 6,
		"iptables-restore v1.8.9 (legacy): \nThe \"nat\" table is not intended for filtering\n\nError occurred at line: 2\nTry `iptables-restore -h'": 2,
		"iptables-restore: unable to initialize table 'nat'": 0,
	} {
		if got := newRestoreError("iptables-restore", []byte(out), errors.New("exit status 1")).Line; got != want {
			t.Errorf("line of %q = %d, want %d", out, got, want)
		}
	}
}

func TestExecSaveInto(t *testing.T) {
	exec := &scriptExec{installed: allInstalled(), results: map[string]scriptResult{
		"ip6tables-legacy-save -t nat":    {stdout: "*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n"},
		"ip6tables-legacy-save -t filter": {stdout: "partial", stderr: "ip6tables-save: permission denied", status: 1},
	}}
	e := New(exec, v1.IPv6Protocol, BackendLegacy)
	buf := bytes.NewBufferString("before\n")
	if err := e.SaveInto(context.Background(), TableNAT, buf); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "before\n*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n"; got != want {
		t.Errorf("buffer = %q, want %q", got, want)
	}
	err := e.SaveInto(context.Background(), TableFilter, buf)
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("error %v, want the command's stderr", err)
	}
	if got, want := buf.String(), "before\n*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n"; got != want {
		t.Errorf("a failed save changed the buffer: %q", got)
	}
}

func TestExecDeleteRuleIsBounded(t *testing.T) {
	// -C keeps succeeding (a rule that -D cannot remove): the loop stops.
	exec := &scriptExec{installed: allInstalled(), results: map[string]scriptResult{
		"iptables-nft -w 5 -C PREROUTING -t nat " + jumpLine: {},
		"iptables-nft -w 5 -D PREROUTING -t nat " + jumpLine: {},
	}}
	err := New(exec, v1.IPv4Protocol, BackendNFT).DeleteRule(context.Background(), TableNAT, ChainPrerouting, jump...)
	if err == nil || len(exec.Calls()) != 2*maxRuleCopies {
		t.Errorf("err=%v after %d calls; want a bounded failure after %d", err, len(exec.Calls()), 2*maxRuleCopies)
	}
}

func TestExecDeleteRuleDeletesEveryCopy(t *testing.T) {
	calls := 0
	exec := &countingExec{scriptExec: scriptExec{installed: allInstalled()}, check: func() int {
		calls++
		if calls <= 2 {
			return 0 // two copies
		}
		return 1
	}}
	if err := New(exec, v1.IPv4Protocol, BackendNFT).DeleteRule(context.Background(), TableNAT, ChainPrerouting, jump...); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"iptables-nft -w 5 -C PREROUTING -t nat " + jumpLine, "iptables-nft -w 5 -D PREROUTING -t nat " + jumpLine,
		"iptables-nft -w 5 -C PREROUTING -t nat " + jumpLine, "iptables-nft -w 5 -D PREROUTING -t nat " + jumpLine,
		"iptables-nft -w 5 -C PREROUTING -t nat " + jumpLine,
	}
	if diff := cmp.Diff(want, exec.Calls()); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
}

// countingExec answers -C with the status check returns and every other
// command with success.
type countingExec struct {
	scriptExec
	check func() int
}

func (e *countingExec) Command(cmd string, args ...string) utilexec.Cmd {
	line := strings.Join(append([]string{cmd}, args...), " ")
	status := 0
	if len(args) > 2 && args[2] == "-C" {
		status = e.check()
	}
	e.mu.Lock()
	if e.results == nil {
		e.results = map[string]scriptResult{}
	}
	e.results[line] = scriptResult{status: status}
	e.mu.Unlock()
	return e.scriptExec.Command(cmd, args...)
}

func (e *countingExec) CommandContext(_ context.Context, cmd string, args ...string) utilexec.Cmd {
	return e.Command(cmd, args...)
}
