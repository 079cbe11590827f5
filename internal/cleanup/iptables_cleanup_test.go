package cleanup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/iptables"
	rendeript "github.com/kproxy/kproxy/internal/render/iptables"
)

// foreignState is everything in a dump that is not ours: chains (and their
// rules) not owned by kube-proxy, and rules in built-in chains that are not
// our jumps. The cleanup must leave exactly this.
func foreignState(f *iptables.Fake) map[string][]string {
	owned := map[string]bool{}
	for _, chains := range fixedChains {
		for _, c := range chains {
			owned[string(c)] = true
		}
	}
	owned[string(mangleCanaryChain)] = true
	out := map[string][]string{}
	for _, table := range []iptables.Table{tableMangle, tableNAT, tableFilter} {
		for _, c := range f.Chains(table) {
			if owned[string(c)] || rendeript.IsServiceChain(string(c)) {
				continue
			}
			var rules []string
			for _, r := range f.Rules(table, c) {
				if target := ruleTarget(r); owned[target] || rendeript.IsServiceChain(target) {
					continue
				}
				rules = append(rules, r)
			}
			out[string(table)+"/"+string(c)] = rules
		}
	}
	return out
}

func TestIPTablesCleanup(t *testing.T) {
	cases := []struct {
		name  string
		dumps []string
	}{
		{"iptables-mode", []string{"iptables-mode.save"}},
		{"iptables-mode-v6", []string{"iptables-mode-v6.save"}},
		{"ipvs-mode", []string{"ipvs-mode.save"}},
		{"mixed", []string{"iptables-mode.save", "ipvs-mode.save"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := loadFake(t, v1.IPv4Protocol, tc.dumps...)
			want := foreignState(f)
			var kubeletChains []string
			for _, c := range []string{"mangle/KUBE-IPTABLES-HINT", "mangle/KUBE-KUBELET-CANARY", "nat/KUBE-KUBELET-CANARY", "filter/KUBE-FIREWALL"} {
				table, chain, _ := strings.Cut(c, "/")
				if f.HasChain(iptables.Table(table), iptables.Chain(chain)) {
					kubeletChains = append(kubeletChains, c)
				}
			}
			if len(kubeletChains) < 3 {
				t.Fatalf("test dump lacks kubelet chains: %v", kubeletChains)
			}

			if err := cleanupIPTables(context.Background(), []iptables.Interface{f}); err != nil {
				t.Fatalf("cleanup: %v", err)
			}

			var got strings.Builder
			for _, data := range f.Restores() {
				// One table per restore: the header names it.
				table, _, _ := strings.Cut(strings.TrimPrefix(data, "*"), "\n")
				fmt.Fprintf(&got, "## iptables-restore -T %s --noflush\n%s", table, data)
			}
			fmt.Fprintf(&got, "## state after cleanup\n%s", f.DumpAll())
			checkGolden(t, tc.name+".golden", got.String())

			// Exactly the foreign state survives: nothing of ours, all of theirs.
			after := foreignState(f)
			for key, rules := range want {
				if fmt.Sprint(after[key]) != fmt.Sprint(rules) {
					t.Errorf("%s: rules changed:\n got %q\nwant %q", key, after[key], rules)
				}
			}
			for _, table := range []iptables.Table{tableMangle, tableNAT, tableFilter} {
				for _, c := range f.Chains(table) {
					if _, ok := want[string(table)+"/"+string(c)]; !ok {
						t.Errorf("owned chain %s/%s survived", table, c)
					}
					for _, r := range f.Rules(table, c) {
						if target := ruleTarget(r); strings.HasPrefix(target, "KUBE-") && target != "KUBE-FIREWALL" {
							t.Errorf("%s/%s still jumps to %s: %s", table, c, target, r)
						}
					}
				}
			}
			for _, kubelet := range kubeletChains {
				table, chain, _ := strings.Cut(kubelet, "/")
				if !f.HasChain(iptables.Table(table), iptables.Chain(chain)) {
					t.Errorf("kubelet chain %s was removed", kubelet)
				}
			}

			// A second run finds nothing to do and succeeds.
			restores := len(f.Restores())
			if err := cleanupIPTables(context.Background(), []iptables.Interface{f}); err != nil {
				t.Fatalf("second cleanup: %v", err)
			}
			if len(f.Restores()) != restores {
				t.Errorf("second cleanup ran %d restores, want none", len(f.Restores())-restores)
			}
		})
	}
}

func TestIPTablesCleanupSkipsAbsentFamily(t *testing.T) {
	f := loadFake(t, v1.IPv6Protocol, "iptables-mode.save")
	f.SetPresent(false)
	before := f.DumpAll()
	if err := cleanupIPTables(context.Background(), []iptables.Interface{f}); err != nil {
		t.Fatal(err)
	}
	if f.DumpAll() != before {
		t.Error("absent family was modified")
	}
}

func TestIPTablesCleanupJoinsErrors(t *testing.T) {
	v4 := loadFake(t, v1.IPv4Protocol, "iptables-mode.save")
	v6 := loadFake(t, v1.IPv6Protocol, "iptables-mode.save")
	natErr := errors.New("nat restore exploded")

	err := cleanupIPTables(context.Background(), []iptables.Interface{failingRestore{Fake: v4, table: tableNAT, err: natErr}, v6})
	if !errors.Is(err, natErr) {
		t.Fatalf("error %v does not wrap the restore failure", err)
	}
	if !strings.Contains(err.Error(), "iptables IPv4") {
		t.Errorf("error %q does not name the family", err)
	}
	// The failure of one table does not stop the others.
	if v4.HasChain(tableFilter, "KUBE-SERVICES") {
		t.Error("IPv4 filter was not cleaned after the nat failure")
	}
	if v6.HasChain(tableNAT, "KUBE-SERVICES") || v6.HasChain(tableFilter, "KUBE-SERVICES") {
		t.Error("IPv6 was not cleaned after the IPv4 failure")
	}
}

func TestRestoreInputNothingOwned(t *testing.T) {
	existing := chainsInDump([]byte("*nat\n:PREROUTING ACCEPT [0:0]\n:OTHER - [0:0]\n:KUBE-KUBELET-CANARY - [0:0]\nCOMMIT\n"))
	if got := restoreInput(tableNAT, existing); got != nil {
		t.Errorf("restoreInput = %q, want nil", got)
	}
}

func TestServiceChainsOnlyInNAT(t *testing.T) {
	// Upstream hunts per-service chains in nat only; a filter chain with
	// such a name belongs to someone else.
	existing := map[iptables.Chain]bool{"KUBE-SVC-ABC": true, "KUBE-SERVICES": true}
	got := string(restoreInput(tableFilter, existing))
	want := "*filter\n:KUBE-SERVICES - [0:0]\n-X KUBE-SERVICES\nCOMMIT\n"
	if got != want {
		t.Errorf("restoreInput(filter) = %q, want %q", got, want)
	}
}

func TestOwnedJumpsDeduplicated(t *testing.T) {
	seen := map[string]bool{}
	for _, j := range ownedJumps() {
		key := string(j.table) + string(j.from) + strings.Join(j.args(), " ")
		if seen[key] {
			t.Errorf("duplicate jump %s", key)
		}
		seen[key] = true
	}
	if len(seen) != len(iptablesModeJumps)+len(ipvsModeJumps)-4 {
		// nat OUTPUT/PREROUTING/POSTROUTING and filter KUBE-FORWARD are shared.
		t.Errorf("got %d distinct jumps", len(seen))
	}
}

// kubeletOnly is a node's tables with the kubelet's chains and no leftover of
// the iptables or ipvs proxier.
const kubeletOnly = `*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-KUBELET-CANARY - [0:0]
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-FIREWALL - [0:0]
-A INPUT -j KUBE-FIREWALL
COMMIT
`

func TestIPTablesCleanupWithoutLeftoversOnlyReads(t *testing.T) {
	f := iptables.NewFake(v1.IPv4Protocol)
	if err := f.Load(kubeletOnly); err != nil {
		t.Fatal(err)
	}
	before := f.DumpAll()
	if err := cleanupIPTables(context.Background(), []iptables.Interface{f}); err != nil {
		t.Fatal(err)
	}
	// No chain of ours exists, so no rule can jump to one: nothing to delete.
	if n := f.Calls(iptables.OpDeleteRule); n != 0 {
		t.Errorf("%d jump deletions on a node without leftovers, want 0", n)
	}
	if n := len(f.Restores()); n != 0 {
		t.Errorf("%d restores on a node without leftovers, want 0", n)
	}
	if n := f.Calls(iptables.OpSaveInto); n != 2 {
		t.Errorf("%d saves, want 2 (nat and filter)", n)
	}
	if f.DumpAll() != before {
		t.Error("a node without leftovers was modified")
	}
}

func TestIPTablesCleanupTriesEveryJumpOfAnUnreadableTable(t *testing.T) {
	f := loadFake(t, v1.IPv4Protocol, "iptables-mode.save")
	saveErr := errors.New("nat save failed")
	f.FailNext(iptables.OpSaveInto, saveErr) // nat is read first
	err := cleanupIPTables(context.Background(), []iptables.Interface{f})
	if !errors.Is(err, saveErr) {
		t.Fatalf("error %v does not wrap the save failure", err)
	}
	// The nat jumps are deleted without a dump, and filter is cleaned in full.
	for _, j := range ownedJumps() {
		for _, r := range f.Rules(j.table, j.from) {
			if ruleTarget(r) == string(j.to) {
				t.Errorf("%s/%s still jumps to %s", j.table, j.from, j.to)
			}
		}
	}
	if f.HasChain(tableFilter, "KUBE-SERVICES") {
		t.Error("filter was not cleaned after the nat save failed")
	}
	if !f.HasChain(tableNAT, "KUBE-SERVICES") {
		t.Error("nat chains were deleted without a dump saying they exist")
	}
}
