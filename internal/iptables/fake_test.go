package iptables

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/kproxy/kproxy/internal/testing/golden"
)

// checkGolden is the shared expected-output check (internal/testing/golden).
var checkGolden = golden.Check

// restoreSteps are restore inputs applied in order to one fake (and, in the
// integration test, to real iptables-restore); the expected dump after all of
// them is testdata/fake-restore.golden.
var restoreSteps = []string{
	// A sync as the iptables proxier writes it: chains declared (created),
	// quoted comments, jumps between chains, several tables in one input.
	`*filter
:KUBE-SERVICES - [0:0]
:KUBE-EXTERNAL-SERVICES - [0:0]
:KUBE-FORWARD - [0:0]
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "ns/noeps:http has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable
-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
COMMIT
*nat
:KUBE-SERVICES - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-SVC-AAAAAAAAAAAAAAAA - [0:0]
:KUBE-SEP-BBBBBBBBBBBBBBBB - [0:0]
:KUBE-SEP-CCCCCCCCCCCCCCCC - [0:0]
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment --comment "default/kubernetes:https cluster IP" -m tcp --dport 443 -j KUBE-SVC-AAAAAAAAAAAAAAAA
-A KUBE-SVC-AAAAAAAAAAAAAAAA -m comment --comment "default/kubernetes:https -> 10.0.0.1:6443" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-BBBBBBBBBBBBBBBB
-A KUBE-SVC-AAAAAAAAAAAAAAAA -m comment --comment "default/kubernetes:https -> 10.0.0.2:6443" -j KUBE-SEP-CCCCCCCCCCCCCCCC
-A KUBE-SEP-BBBBBBBBBBBBBBBB -s 10.0.0.1/32 -m comment --comment default/kubernetes:https -j KUBE-MARK-MASQ
-A KUBE-SEP-BBBBBBBBBBBBBBBB -p tcp -m comment --comment default/kubernetes:https -m tcp -j DNAT --to-destination 10.0.0.1:6443
-A KUBE-SEP-CCCCCCCCCCCCCCCC -p tcp -m comment --comment default/kubernetes:https -m tcp -j DNAT --to-destination 10.0.0.2:6443
COMMIT
`,
	// A partial sync: one chain redeclared (flushed) and rewritten, one
	// endpoint chain removed, a comment with escaped quotes, an insert.
	`*nat
:KUBE-SVC-AAAAAAAAAAAAAAAA - [0:0]
:KUBE-SEP-CCCCCCCCCCCCCCCC - [0:0]
-A KUBE-SVC-AAAAAAAAAAAAAAAA -m comment --comment "default/kubernetes:https -> 10.0.0.1:6443" -j KUBE-SEP-BBBBBBBBBBBBBBBB
-X KUBE-SEP-CCCCCCCCCCCCCCCC
-A KUBE-MARK-MASQ -m comment --comment "say \"hi\"" -j RETURN
-I KUBE-MARK-MASQ 1 -m comment --comment first -j RETURN
-D KUBE-MARK-MASQ -m comment --comment "say \"hi\"" -j RETURN
COMMIT
`,
	// Jumps from built-in chains; a built-in chain's declaration does not
	// flush it.
	`*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:KUBE-PROXY-CANARY - [0:0]
COMMIT
*mangle
:KUBE-PROXY-CANARY - [0:0]
COMMIT
`,
}

func TestFakeRestoreSequence(t *testing.T) {
	f := NewFake(v1.IPv4Protocol)
	for i, step := range restoreSteps {
		if err := f.Restore(context.Background(), []byte(step)); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	var got strings.Builder
	for _, table := range []Table{TableFilter, TableNAT, TableMangle} {
		got.WriteString(f.Dump(table))
	}
	checkGolden(t, "fake-restore.golden", got.String())
	if got, want := f.Restores(), restoreSteps; !slices.Equal(got, want) {
		t.Errorf("Restores() = %q", got)
	}
	if f.Calls(OpRestore) != len(restoreSteps) {
		t.Errorf("Calls(Restore) = %d", f.Calls(OpRestore))
	}
}

func TestFakeRestoreFailures(t *testing.T) {
	const base = "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-X - [0:0]\n-A KUBE-SERVICES -j KUBE-SVC-X\n-A KUBE-SVC-X -j RETURN\nCOMMIT\n"
	cases := []struct {
		name, input string
		line        int
		msg         string
	}{
		{"append to an absent chain", "*nat\n-A KUBE-NOPE -j RETURN\nCOMMIT\n", 2, "No chain/target/match"},
		{"jump to an absent chain", "*nat\n-A KUBE-SERVICES -j KUBE-NOPE\nCOMMIT\n", 2, "Couldn't load target `KUBE-NOPE'"},
		{"delete an absent rule", "*nat\n-D KUBE-SERVICES -j RETURN\nCOMMIT\n", 2, "does a matching rule exist"},
		{"delete an absent chain", "*nat\n-X KUBE-NOPE\nCOMMIT\n", 2, "No chain/target/match"},
		{"delete a referenced chain", "*nat\n:KUBE-SVC-X - [0:0]\n-X KUBE-SVC-X\nCOMMIT\n", 3, "Too many links"},
		{"delete a chain with rules", "*nat\n-D KUBE-SERVICES -j KUBE-SVC-X\n-X KUBE-SVC-X\nCOMMIT\n", 3, "Directory not empty"},
		{"delete a built-in chain", "*nat\n-X PREROUTING\nCOMMIT\n", 2, "built-in"},
		{"DROP in nat", "*nat\n-A KUBE-SERVICES -j DROP\nCOMMIT\n", 2, "DROP is therefore inhibited"},
		{"chain name too long", "*nat\n:KUBE-SVC-ABCDEFGHIJKLMNOPQRSTUVWXYZ - [0:0]\nCOMMIT\n", 2, "28 chars max"},
		{"insert beyond the end", "*nat\n-I KUBE-SERVICES 3 -j RETURN\nCOMMIT\n", 2, "Index of insertion too big"},
		{"unterminated quote", "*nat\n-A KUBE-SERVICES -m comment --comment \"oops -j RETURN\nCOMMIT\n", 2, "Unterminated quote"},
		{"missing COMMIT", "*nat\n:KUBE-NEW - [0:0]\n", 3, "COMMIT expected"},
		{"unknown table", "*bogus\nCOMMIT\n", 1, "Table does not exist"},
		{"rule outside a table", "-A KUBE-SERVICES -j RETURN\n", 1, "outside a table"},
		{"second section fails", "*filter\n:KUBE-FILTER-OK - [0:0]\nCOMMIT\n*nat\n:KUBE-SVC-X - [0:0]\n-A KUBE-NOPE -j RETURN\nCOMMIT\n", 6, "No chain/target/match"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake(v1.IPv6Protocol)
			if err := f.Restore(context.Background(), []byte(base)); err != nil {
				t.Fatal(err)
			}
			before := f.Dump(TableNAT)
			err := f.Restore(context.Background(), []byte(tc.input))
			var re *RestoreError
			if !errors.As(err, &re) {
				t.Fatalf("error %v is not a *RestoreError", err)
			}
			if re.Line != tc.line || !strings.Contains(err.Error(), tc.msg) || re.Command != "ip6tables-restore" {
				t.Errorf("error %q (line %d), want line %d and %q", err, re.Line, tc.line, tc.msg)
			}
			var exitErr utilexec.ExitError
			if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 1 {
				t.Errorf("error does not wrap exit status 1: %v", err)
			}
			if got := f.Dump(TableNAT); got != before {
				t.Errorf("the failed section changed nat:\n%s", got)
			}
		})
	}
	// As with the real binaries, a section committed before the failing one
	// stays applied.
	f := NewFake(v1.IPv4Protocol)
	_ = f.Restore(context.Background(), []byte("*filter\n:KUBE-FILTER-OK - [0:0]\nCOMMIT\n*nat\n-A KUBE-NOPE -j RETURN\nCOMMIT\n"))
	if !f.HasChain(TableFilter, "KUBE-FILTER-OK") {
		t.Error("the committed filter section was discarded")
	}
}

func TestFakeQuotedArguments(t *testing.T) {
	f := NewFake(v1.IPv4Protocol)
	input := "*nat\n:KUBE-SERVICES - [0:0]\n" +
		`-A KUBE-SERVICES -m comment --comment "ns/svc:port cluster IP" -j RETURN` + "\n" +
		`-A KUBE-SERVICES -m comment --comment plain_word-1 -j RETURN` + "\n" +
		`-A KUBE-SERVICES -m comment --comment "a.b" -j RETURN` + "\n" +
		`-A KUBE-SERVICES -m comment --comment "back\\slash \"quoted\"" -j RETURN` + "\n" +
		"COMMIT\n"
	if err := f.Restore(context.Background(), []byte(input)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`-m comment --comment "ns/svc:port cluster IP" -j RETURN`,
		`-m comment --comment plain_word-1 -j RETURN`,
		`-m comment --comment "a.b" -j RETURN`,
		`-m comment --comment "back\\slash \"quoted\"" -j RETURN`,
	}
	if diff := cmp.Diff(want, f.Rules(TableNAT, "KUBE-SERVICES")); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	// The Interface methods take unquoted arguments and match the same rule.
	ctx := context.Background()
	existed, err := f.EnsureRule(ctx, false, TableNAT, "KUBE-SERVICES", "-m", "comment", "--comment", "ns/svc:port cluster IP", "-j", "RETURN")
	if err != nil || !existed {
		t.Errorf("EnsureRule of a restored rule: existed=%v err=%v", existed, err)
	}
	if err := f.DeleteRule(ctx, TableNAT, "KUBE-SERVICES", "-m", "comment", "--comment", `back\slash "quoted"`, "-j", "RETURN"); err != nil {
		t.Fatal(err)
	}
	if got := len(f.Rules(TableNAT, "KUBE-SERVICES")); got != 3 {
		t.Errorf("%d rules left, want 3", got)
	}
	// The dump is valid restore input that reproduces the same state.
	g := NewFake(v1.IPv4Protocol)
	if err := g.Restore(ctx, []byte(f.Dump(TableNAT))); err != nil {
		t.Fatal(err)
	}
	if f.Dump(TableNAT) != g.Dump(TableNAT) {
		t.Errorf("dump does not round-trip:\n%s\n%s", f.Dump(TableNAT), g.Dump(TableNAT))
	}
}

func TestSplitArgs(t *testing.T) {
	for in, want := range map[string][]string{
		`-A X  -j   RETURN`:                  {"-A", "X", "-j", "RETURN"},
		"-A X\t-j RETURN":                    {"-A", "X", "-j", "RETURN"},
		`--comment "" -j X`:                  {"--comment", "", "-j", "X"},
		`--comment "a b"c`:                   {"--comment", "a b", "c"},
		`--comment "x\"y\\z"`:                {"--comment", `x"y\z`},
		`--comment a\b`:                      {"--comment", `a\b`},
		`-m comment --comment "ns/svc:port"`: {"-m", "comment", "--comment", "ns/svc:port"},
	} {
		got, err := SplitArgs(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("SplitArgs(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestFakeInterfaceMethods(t *testing.T) {
	ctx := context.Background()
	f := NewFake(v1.IPv6Protocol)
	if f.Family() != v1.IPv6Protocol || !f.Present(ctx) {
		t.Fatal("new fake: wrong family or absent")
	}
	f.SetPresent(false)
	if f.Present(ctx) {
		t.Error("SetPresent(false) ignored")
	}
	if existed, err := f.EnsureChain(ctx, TableNAT, "KUBE-A"); existed || err != nil {
		t.Errorf("EnsureChain new = %v, %v", existed, err)
	}
	if existed, err := f.EnsureChain(ctx, TableNAT, "KUBE-A"); !existed || err != nil {
		t.Errorf("EnsureChain again = %v, %v", existed, err)
	}
	if ok, err := f.ChainExists(ctx, TableNAT, "KUBE-A"); !ok || err != nil {
		t.Errorf("ChainExists = %v, %v", ok, err)
	}
	if ok, _ := f.ChainExists(ctx, TableFilter, "KUBE-A"); ok {
		t.Error("ChainExists in the wrong table")
	}
	if _, err := f.EnsureRule(ctx, false, TableNAT, ChainOutput, "-j", "KUBE-A"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.EnsureRule(ctx, true, TableNAT, ChainOutput, "-m", "comment", "--comment", "first", "-j", "KUBE-A"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.EnsureRule(ctx, false, TableNAT, ChainOutput, "-j", "KUBE-NOPE"); err == nil {
		t.Error("EnsureRule jumping to an absent chain succeeded")
	}
	if got, want := f.Rules(TableNAT, ChainOutput), []string{"-m comment --comment first -j KUBE-A", "-j KUBE-A"}; !slices.Equal(got, want) {
		t.Errorf("OUTPUT rules = %q, want %q", got, want)
	}
	if err := f.DeleteChain(ctx, TableNAT, "KUBE-A"); err == nil {
		t.Error("DeleteChain of a referenced chain succeeded")
	}
	var exitErr utilexec.ExitError
	if err := f.FlushChain(ctx, TableNAT, "KUBE-NOPE"); err == nil || !errors.As(err, &exitErr) || exitErr.ExitStatus() != 1 {
		t.Errorf("FlushChain of an absent chain = %v, want exit status 1", err)
	}
	for _, args := range [][]string{{"-j", "KUBE-A"}, {"-m", "comment", "--comment", "first", "-j", "KUBE-A"}, {"-j", "KUBE-A"}} {
		if err := f.DeleteRule(ctx, TableNAT, ChainOutput, args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.DeleteRule(ctx, TableNAT, "KUBE-NOPE", "-j", "RETURN"); err != nil {
		t.Errorf("DeleteRule in an absent chain: %v", err)
	}
	if err := f.DeleteChain(ctx, TableNAT, "KUBE-A"); err != nil {
		t.Fatal(err)
	}
	if err := f.DeleteChain(ctx, TableNAT, "KUBE-A"); err != nil {
		t.Errorf("DeleteChain of an absent chain: %v", err)
	}
	var buf bytes.Buffer
	if err := f.SaveInto(ctx, TableNAT, &buf); err != nil {
		t.Fatal(err)
	}
	if want := "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n"; buf.String() != want {
		t.Errorf("SaveInto = %q, want %q", buf.String(), want)
	}
	if err := f.SaveInto(ctx, "bogus", &buf); err == nil {
		t.Error("SaveInto of an unknown table succeeded")
	}
}

func TestFakeFailureInjection(t *testing.T) {
	ctx := context.Background()
	f := NewFake(v1.IPv4Protocol)
	boom := errors.New("boom")
	f.FailNext(OpRestore, boom)
	if err := f.Restore(ctx, []byte("*nat\n:KUBE-A - [0:0]\nCOMMIT\n")); !errors.Is(err, boom) {
		t.Errorf("Restore = %v, want boom", err)
	}
	if f.HasChain(TableNAT, "KUBE-A") {
		t.Error("a failed Restore changed the state")
	}
	if err := f.Restore(ctx, []byte("*nat\n:KUBE-A - [0:0]\nCOMMIT\n")); err != nil {
		t.Errorf("FailNext failed twice: %v", err)
	}
	f.FailAlways(OpChainExists, boom)
	for range 2 {
		if _, err := f.ChainExists(ctx, TableNAT, "KUBE-A"); !errors.Is(err, boom) {
			t.Errorf("ChainExists = %v, want boom", err)
		}
	}
	f.FailAlways(OpChainExists, nil)
	if ok, err := f.ChainExists(ctx, TableNAT, "KUBE-A"); !ok || err != nil {
		t.Errorf("after FailAlways(nil): %v, %v", ok, err)
	}
	if f.Calls(OpChainExists) != 3 || f.Calls(OpRestore) != 2 {
		t.Errorf("calls: ChainExists %d, Restore %d", f.Calls(OpChainExists), f.Calls(OpRestore))
	}
	for _, op := range []Op{OpSaveInto, OpEnsureChain, OpEnsureRule, OpDeleteRule, OpFlushChain, OpDeleteChain} {
		f.FailNext(op, boom)
	}
	var buf bytes.Buffer
	errs := []error{
		f.SaveInto(ctx, TableNAT, &buf),
		second(f.EnsureChain(ctx, TableNAT, "KUBE-B")),
		second(f.EnsureRule(ctx, false, TableNAT, "KUBE-A", "-j", "RETURN")),
		f.DeleteRule(ctx, TableNAT, "KUBE-A", "-j", "RETURN"),
		f.FlushChain(ctx, TableNAT, "KUBE-A"),
		f.DeleteChain(ctx, TableNAT, "KUBE-A"),
	}
	for i, err := range errs {
		if !errors.Is(err, boom) {
			t.Errorf("call %d: %v, want boom", i, err)
		}
	}
	if f.HasChain(TableNAT, "KUBE-B") || !f.HasChain(TableNAT, "KUBE-A") {
		t.Error("failed calls changed the state")
	}
}

func second[T any](_ T, err error) error { return err }

func TestFakeLoadAddsUp(t *testing.T) {
	f := NewFake(v1.IPv4Protocol)
	dump := "# Generated by iptables-save\n*nat\n:PREROUTING ACCEPT [3:180]\n:KUBE-SERVICES - [0:0]\n-A PREROUTING -j KUBE-SERVICES\n[5:300] -A KUBE-SERVICES -j RETURN\nCOMMIT\n"
	for range 2 {
		if err := f.Load(dump); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.Rules(TableNAT, "KUBE-SERVICES"); len(got) != 2 {
		t.Errorf("KUBE-SERVICES after two loads = %q, want the rule twice", got)
	}
	if got := f.Chains(TableNAT); !slices.Equal(got, []Chain{ChainPrerouting, ChainInput, ChainOutput, ChainPostrouting, "KUBE-SERVICES"}) {
		t.Errorf("Chains = %q", got)
	}
	// Restore instead flushes the declared user chain (but not PREROUTING).
	if err := f.Restore(context.Background(), []byte(dump)); err != nil {
		t.Fatal(err)
	}
	if got := f.Rules(TableNAT, "KUBE-SERVICES"); len(got) != 1 {
		t.Errorf("KUBE-SERVICES after a restore = %q, want one rule", got)
	}
	if got := f.Rules(TableNAT, ChainPrerouting); len(got) != 3 {
		t.Errorf("PREROUTING after a restore = %q, want three rules (built-in chains are not flushed)", got)
	}
}

func TestFakeDumpAll(t *testing.T) {
	f := NewFake(v1.IPv4Protocol)
	if err := f.Restore(context.Background(), []byte("*raw\n:KUBE-RAW - [0:0]\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	var tables []string
	for _, line := range strings.Split(f.DumpAll(), "\n") {
		if strings.HasPrefix(line, "*") {
			tables = append(tables, line)
		}
	}
	if want := []string{"*filter", "*mangle", "*nat", "*raw"}; !slices.Equal(tables, want) {
		t.Errorf("DumpAll tables = %q, want %q", tables, want)
	}
	if f.Dump("security") != "" {
		t.Error("an untouched table was dumped")
	}
}
