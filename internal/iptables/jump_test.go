package iptables

import (
	"context"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestEnsureJump(t *testing.T) {
	ctx := context.Background()
	f := NewFake(v1.IPv4Protocol)
	if err := f.Load("*nat\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -j SOMEONE-ELSES\nCOMMIT\n"); err != nil {
		t.Fatal(err)
	}
	args := []string{"-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES"}
	for range 2 { // the second call finds both and adds nothing
		if err := EnsureJump(ctx, f, TableNAT, "OUTPUT", "KUBE-SERVICES", args); err != nil {
			t.Fatal(err)
		}
	}
	if !f.HasChain(TableNAT, "KUBE-SERVICES") {
		t.Error("the target chain was not created")
	}
	want := []string{`-m comment --comment "kubernetes service portals" -j KUBE-SERVICES`, "-j SOMEONE-ELSES"}
	if got := f.Rules(TableNAT, "OUTPUT"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("OUTPUT holds %q, want %q (the jump first, once; the other rule kept)", got, want)
	}

	broken := errors.New("xtables lock held")
	f.FailNext(OpEnsureRule, broken)
	err := EnsureJump(ctx, f, TableNAT, "PREROUTING", "KUBE-SERVICES", args)
	if !errors.Is(err, broken) || !strings.Contains(err.Error(), "jump from PREROUTING to KUBE-SERVICES in table nat") {
		t.Errorf("EnsureJump with a failing rule insert = %v, want the cause wrapped and the jump named", err)
	}
}
