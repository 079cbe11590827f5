package nfttrace

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/trace"
)

// newFake loads an "nft -f"-style dump into a Fake for table "t" of the given family.
// "FAM" in the dump is replaced by the family, so one ruleset serves ip and ip6.
func newFake(t *testing.T, family knftables.Family, dump string) *knftables.Fake {
	t.Helper()
	nft := knftables.NewFake(family, "t")
	dump = strings.ReplaceAll(dump, "FAM", string(family))
	// knftables' ParseDump cannot parse quoted strings inside rules, so rules are
	// added through a transaction, the way a renderer would.
	var objects []string
	tx := nft.NewTransaction()
	rulePrefix := "add rule " + string(family) + " t "
	for _, line := range strings.Split(dump, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), rulePrefix); ok {
			chain, rule, _ := strings.Cut(rest, " ")
			tx.Add(&knftables.Rule{Chain: chain, Rule: rule})
			continue
		}
		objects = append(objects, line)
	}
	if err := nft.ParseDump(strings.Join(objects, "\n")); err != nil {
		t.Fatalf("ParseDump: %v\n%s", err, dump)
	}
	if err := nft.Run(context.Background(), tx); err != nil {
		t.Fatalf("adding rules: %v\n%s", err, dump)
	}
	return nft
}

// baseChains is a table with one base chain per hook used by kube-proxy, each jumping
// to a regular chain of the same name without the "-base" suffix, so tests only add
// rules to the regular chains they care about.
const baseChains = `
add table FAM t
add chain FAM t prerouting-base { type nat hook prerouting priority dstnat ; }
add chain FAM t output-base { type nat hook output priority -100 ; }
add chain FAM t postrouting-base { type nat hook postrouting priority srcnat ; }
add chain FAM t filter-prerouting-base { type filter hook prerouting priority -110 ; }
add chain FAM t forward-base { type filter hook forward priority filter ; }
add chain FAM t input-base { type filter hook input priority filter ; }
add chain FAM t filter-output-base { type filter hook output priority filter ; }
add chain FAM t prerouting
add chain FAM t output
add chain FAM t postrouting
add chain FAM t filter-prerouting
add chain FAM t forward
add chain FAM t input
add chain FAM t filter-output
add rule FAM t prerouting-base jump prerouting
add rule FAM t output-base jump output
add rule FAM t postrouting-base jump postrouting
add rule FAM t filter-prerouting-base jump filter-prerouting
add rule FAM t forward-base jump forward
add rule FAM t input-base jump input
add rule FAM t filter-output-base jump filter-output
`

func mustTrace(t *testing.T, nft *knftables.Fake, local []string, p trace.Packet) *trace.Result {
	t.Helper()
	res, err := Trace(nft, local, p)
	if err != nil {
		t.Fatalf("Trace(%+v): %v", p, err)
	}
	return res
}
