package nftnetlink

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"
)

// TestBuildGolden translates every expected-output file of the renderer (no kernel
// needed: the files define every set they use) and compares the batch with
// testdata/<case>.netlink (dumpBatch), rewritten with -update: the netlink bytes of
// every case are pinned, whichever way the translation is built.
func TestBuildGolden(t *testing.T) {
	files, err := filepath.Glob("../render/nftables/testdata/*.nft")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		family := knftables.IPv4Family
		if strings.Contains(string(data), "add table ip6 ") {
			family = knftables.IPv6Family
		}
		ex, err := New(family, "kube-proxy", Options{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := ex.build(slices.Values([]string{string(data)}), nil, true)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
			continue
		}
		checkGolden(t, strings.TrimSuffix(filepath.Base(f), ".nft")+".netlink", dumpBatch(b.buffers()))
	}
}

// TestUnsupportedSyntaxFails: anything outside the vocabulary is an error naming
// the command, never a different ruleset.
func TestUnsupportedSyntaxFails(t *testing.T) {
	prefix := "add table ip kube-proxy\nadd chain ip kube-proxy c\nadd set ip kube-proxy s { type ipv4_addr ; }\n"
	for _, line := range []string{
		"add rule ip kube-proxy c tcp dport 80 accept",
		"add rule ip kube-proxy c ip daddr 1.2.3.4 log",
		"add rule ip kube-proxy c ip6 daddr ::1 drop",
		"add rule ip kube-proxy c ip protocol tcp drop",
		"add rule ip kube-proxy c counter packets 0 bytes 0 drop",
		"add rule ip kube-proxy c drop comment \"x\" accept",
		"add rule ip kube-proxy c ct state bogus drop",
		"add rule ip kube-proxy c meta l4proto tcp dnat to 10.0.0.1:99999",
		"add rule ip kube-proxy c ip daddr @s vmap",
		"add rule ip kube-proxy c reject with tcp reset",
		"add rule ip kube-proxy c index 0 drop",
		"insert rule ip kube-proxy c drop",
		"add set ip kube-proxy t { typeof ip daddr ; }",
		"add set ip kube-proxy t { type ipv4_addr ; flags bogus ; }",
		"add chain ip kube-proxy b { type filter hook ingress priority 0 ; }",
		"add element ip kube-proxy s { 10.0.0.1 : drop }",
		"add element ip kube-proxy s { tcp }",
		"add element ip kube-proxy nosuchset { 10.0.0.1 }",
		"add table inet kube-proxy",
		"add flowtable ip kube-proxy f",
	} {
		ex, _ := New(knftables.IPv4Family, "kube-proxy", Options{})
		_, err := ex.build(slices.Values([]string{prefix + line + "\n"}), nil, true)
		if err == nil {
			t.Errorf("%q: accepted", line)
			continue
		}
		if !strings.Contains(err.Error(), strconv.Quote(line)) {
			t.Errorf("%q: error does not name the command: %v", line, err)
		}
	}
}

// TestPendingTransactionError: an invalid knftables operation fails Run before any
// I/O, as with knftables' own Run.
func TestPendingTransactionError(t *testing.T) {
	ex, err := New(knftables.IPv4Family, "kube-proxy", Options{NetNSPath: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	tx := ex.NewTransaction()
	tx.Add(&knftables.Rule{Chain: "c"}) // no rule text
	err = ex.Run(context.Background(), tx)
	if err == nil || !strings.Contains(err.Error(), "transaction error") {
		t.Fatalf("got %v, want the transaction's own error", err)
	}
	if err := ex.Run(context.Background(), ex.NewTransaction()); err != nil {
		t.Fatalf("empty transaction: %v", err)
	}
}

func TestNewRejectsOtherFamilies(t *testing.T) {
	if _, err := New(knftables.InetFamily, "kube-proxy", Options{}); err == nil {
		t.Error("inet accepted")
	}
	if _, err := New(knftables.IPv4Family, "", Options{}); err == nil {
		t.Error("empty table accepted")
	}
}
