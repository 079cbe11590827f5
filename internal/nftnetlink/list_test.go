package nftnetlink

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestListAll lists a table's chains, named sets, maps and counters by netlink (not
// its anonymous sets or other stateful objects, not another table's objects), and
// nothing for a missing table.
func TestListAll(t *testing.T) {
	ns, ex := testExecutor(t)
	ctx := context.Background()
	if got, err := ex.ListAll(ctx); err != nil || len(got["chain"])+len(got["set"])+len(got["map"]) != 0 {
		t.Fatalf("ListAll of a missing table = %v, %v; want nothing", got, err)
	}
	// Another table's objects and an anonymous set (in a rule) must not be listed;
	// enough chains that the dump spans several datagrams.
	var extra strings.Builder
	for i := range 500 {
		fmt.Fprintf(&extra, "add chain ip kube-proxy many-%03d\n", i)
	}
	script := vocabBase + extra.String() +
		"add rule ip kube-proxy c1 ip daddr { 10.0.0.1, 10.0.0.2 } accept\n" +
		"add counter ip kube-proxy k2\nadd counter ip kube-proxy k1 { packets 3 bytes 120 ; }\n" +
		"add quota ip kube-proxy q1 { 100 mbytes }\n" +
		"add table ip other\nadd chain ip other oc\nadd set ip other os { type ipv4_addr ; }\nadd counter ip other ok\n"
	if out, err := nftIn(ns, script, "-f", "-"); err != nil {
		t.Fatalf("loading the tables: %v\n%s", err, out)
	}
	got, err := ex.ListAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, names := range got {
		slices.Sort(names)
	}
	wantChains := []string{"c1", "c2", "filter-in", "nat-post", "nat-pre"}
	for i := range 500 {
		wantChains = append(wantChains, fmt.Sprintf("many-%03d", i))
	}
	slices.Sort(wantChains)
	if !slices.Equal(got["chain"], wantChains) {
		t.Errorf("chains = %d names %v..., want %d", len(got["chain"]), got["chain"][:min(8, len(got["chain"]))], len(wantChains))
	}
	if want := []string{"aff", "iv", "s4", "sized", "spare"}; !slices.Equal(got["set"], want) {
		t.Errorf("sets = %v, want %v", got["set"], want)
	}
	if want := []string{"data", "m2"}; !slices.Equal(got["map"], want) {
		t.Errorf("maps = %v, want %v", got["map"], want)
	}
	// Named counters, not the other stateful objects or another table's.
	if want := []string{"k1", "k2"}; !slices.Equal(got["counter"], want) {
		t.Errorf("counters = %v, want %v", got["counter"], want)
	}
}
