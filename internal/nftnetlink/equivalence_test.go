package nftnetlink

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"
)

// listTable lists the table, with the elements of each set sorted (the kernel may
// dump hash sets in insertion-dependent order).
func listTable(t *testing.T, ns string, family knftables.Family, table string) string {
	t.Helper()
	out, err := nftIn(ns, "", "list", "table", string(family), table)
	if err != nil {
		t.Fatalf("nft list: %v\n%s", err, out)
	}
	dbg, err := nftIn(ns, "", "--debug=netlink", "list", "table", string(family), table)
	if err != nil {
		t.Fatalf("nft --debug=netlink list: %v\n%s", err, dbg)
	}
	// The listing, then the kernel's view: every expression with its registers and
	// every element's bytes.
	return sortElements(out) + "\n--- netlink ---\n" + sortElementRuns(dbg)
}

// sortElementRuns sorts consecutive "element" lines of nft --debug=netlink output.
func sortElementRuns(s string) string {
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[j]), "element ") {
			j++
		}
		if j > i {
			sort.Strings(lines[i:j])
			i = j
		} else {
			i++
		}
	}
	return strings.Join(lines, "\n")
}

// sortElements sorts the items of multi-line "elements = { … }" lists.
func sortElements(s string) string {
	lines := strings.Split(s, "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		trim := strings.TrimSpace(l)
		if !strings.HasPrefix(trim, "elements = {") || strings.HasSuffix(trim, "}") {
			out = append(out, l)
			continue
		}
		// Gather until the closing brace.
		body := strings.TrimPrefix(trim, "elements = {")
		for i+1 < len(lines) {
			i++
			body += " " + strings.TrimSpace(lines[i])
			if strings.HasSuffix(strings.TrimSpace(lines[i]), "}") {
				break
			}
		}
		body = strings.TrimSuffix(strings.TrimSpace(body), "}")
		items := strings.Split(body, ",")
		for j := range items {
			items[j] = strings.TrimSpace(items[j])
		}
		sort.Strings(items)
		out = append(out, "elements = { "+strings.Join(items, ", ")+" }")
	}
	return strings.Join(out, "\n")
}

// compareScripts applies the scripts in order with nft in one namespace and with
// the executor in another, and compares the listings after each.
func compareScripts(t *testing.T, family knftables.Family, table string, scripts ...string) {
	t.Helper()
	nsNft, nsNl := testNetns(t), testNetns(t)
	ex, err := New(family, table, Options{NetNSPath: netnsPath(nsNl)})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range scripts {
		if out, err := nftIn(nsNft, s); err != nil {
			t.Fatalf("script %d: nft -f: %v\n%s", i, err, out)
		}
		if err := ex.apply(context.Background(), oneText(s), true); err != nil {
			t.Fatalf("script %d: netlink: %v", i, err)
		}
		want, got := listTable(t, nsNft, family, table), listTable(t, nsNl, family, table)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("script %d: listing differs (-nft +netlink):\n%s", i, diff)
		}
	}
}

// TestEquivalentToNftGolden applies every expected-output file of the renderer.
func TestEquivalentToNftGolden(t *testing.T) {
	needRoot(t)
	files, err := filepath.Glob("../render/nftables/testdata/*.nft")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			family := knftables.IPv4Family
			if strings.Contains(string(data), "add table ip6 ") {
				family = knftables.IPv6Family
			}
			// Twice: the second run replaces the table in place (add, delete, add).
			compareScripts(t, family, "kube-proxy", string(data), string(data))
		})
	}
}
