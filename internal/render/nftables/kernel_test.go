package nftables

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/testing/roottest"
)

// runInNetns runs the nft scripts, in order, in a network namespace of its own that
// disappears with the process, so the machine's ruleset is never touched, and
// returns what they printed.
func runInNetns(t testing.TB, scripts ...string) string {
	t.Helper()
	roottest.Require(t, "loads rules with nft in a private network namespace", "nft", "unshare")
	dir := t.TempDir()
	cmd := "set -e"
	for i, s := range scripts {
		path := filepath.Join(dir, "tx"+string(rune('a'+i))+".nft")
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd += "; nft -f " + path
	}
	out, err := exec.CommandContext(context.Background(), "unshare", "--net", "sh", "-c", cmd).CombinedOutput()
	if err != nil {
		t.Fatalf("kernel refused a transaction: %v\n%s", err, out)
	}
	return string(out)
}

// TestKernelAcceptsPlans loads a full sync then each delta into a real kernel (in a
// private network namespace): the syntax, the object order inside transactions and
// the deletion of chains right after their last reference must all be accepted.
func TestKernelAcceptsPlans(t *testing.T) {
	for _, endpointMaps := range []bool{false, true} {
		cfg := testConfig(knftables.IPv4Family)
		cfg.EndpointMaps = endpointMaps
		for _, tc := range planCases() {
			kernelAcceptsPlan(t, cfg, tc)
		}
	}
}

func kernelAcceptsPlan(t *testing.T, cfg *Config, tc planCase) {
	{
		for _, deferDeletes := range []bool{false, true} {
			if deferDeletes && !tc.deferToo {
				continue
			}
			t.Run(fmt.Sprintf("endpointMaps=%v/%s", cfg.EndpointMaps, tc.name), func(t *testing.T) {
				fake := knftables.NewFake(cfg.Family, TableName)
				st := renderAll(cfg, tc.before...)
				full := fake.NewTransaction()
				WriteFull(full, st)
				delta := fake.NewTransaction()
				plan := planInto(delta, st, nil, updatesBetween(st, renderFragments(cfg, tc.after)), PlanOptions{DeferChainDeletes: deferDeletes})
				st.Commit(plan)
				scripts := []string{full.String(), delta.String()}
				if len(plan.StaleChains) > 0 {
					later := fake.NewTransaction()
					deleteStaleInto(later, st, plan.StaleChains)
					scripts = append(scripts, later.String())
				}
				// Running the full sync again replaces the table atomically.
				scripts = append(scripts, full.String())
				runInNetns(t, scripts...)
			})
		}
	}
}

// TestKernelAcceptsRefresh: a full sync that refreshes the table in place (after
// each plan case's "before" state, to its "after" state) is accepted by a real
// kernel, deletes what the new state lacks, and keeps the affinity memory the
// packet path stored.
func TestKernelAcceptsRefresh(t *testing.T) {
	for _, endpointMaps := range []bool{false, true} {
		cfg := testConfig(knftables.IPv4Family)
		cfg.EndpointMaps = endpointMaps
		for _, tc := range planCases() {
			t.Run(fmt.Sprintf("endpointMaps=%v/%s", cfg.EndpointMaps, tc.name), func(t *testing.T) {
				fake := knftables.NewFake(cfg.Family, TableName)
				before := renderAll(cfg, tc.before...)
				full := fake.NewTransaction()
				WriteFull(full, before)
				after := renderAll(cfg, tc.after...)
				refresh := fake.NewTransaction()
				WriteRefresh(refresh, after, existingOf(before, nil, nil, nil))
				// Refreshing again, from the state it left, changes nothing.
				again := fake.NewTransaction()
				WriteRefresh(again, after, existingOf(after, nil, nil, nil))
				const list = "list table ip kube-proxy\n"
				got := runInNetns(t, full.String(), refresh.String(), again.String(), list)
				direct := fake.NewTransaction()
				WriteFull(direct, after)
				if want := runInNetns(t, direct.String(), list); !slices.Equal(listingBlocks(got), listingBlocks(want)) {
					t.Errorf("the refreshed table differs from a full sync of the same state:\n--- refreshed\n%s\n--- full sync\n%s", got, want)
				}
			})
		}
	}

	cfg, st := affinityCase(t)
	set := affinitySets(st)[0]
	full := knftables.NewFake(cfg.Family, TableName).NewTransaction()
	WriteFull(full, st)
	refresh := knftables.NewFake(cfg.Family, TableName).NewTransaction()
	WriteRefresh(refresh, st, existingOf(st, []string{"foreign-chain"}, nil, []string{"foreign-map"}))
	out := runInNetns(t, full.String(),
		"add element ip kube-proxy "+set+" { 10.0.0.9 }\n"+
			"add chain ip kube-proxy foreign-chain\n"+
			"add map ip kube-proxy foreign-map { type ipv4_addr : verdict ; }\n"+
			"add element ip kube-proxy foreign-map { 10.9.9.9 : goto foreign-chain }\n",
		refresh.String(),
		"list table ip kube-proxy\n")
	if !strings.Contains(out, "10.0.0.9") {
		t.Errorf("the refresh dropped the affinity memory of %s:\n%s", set, out)
	}
	if strings.Contains(out, "foreign") {
		t.Errorf("the refresh kept objects the state lacks:\n%s", out)
	}
}

func TestKernelAcceptsGoldenRulesets(t *testing.T) {
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			cfg, views := tc.build()
			fake := knftables.NewFake(cfg.Family, TableName)
			tx := fake.NewTransaction()
			WriteFull(tx, renderAll(cfg, views...))
			runInNetns(t, tx.String())
		})
	}
}

// BenchmarkKernelTiming10k times nft -f of a full sync of 10,000 Services x 10
// endpoints and of one-endpoint deltas and a deletion on top, in a private network
// namespace: one iteration is the whole experiment, reported in ms (the machine's
// figures, not the code's; the daemon writes over netlink, see nftnetlink's
// BenchmarkKernelTiming10k).
func BenchmarkKernelTiming10k(b *testing.B) {
	roottest.Require(b, "loads rules with nft in a private network namespace", "nft", "unshare")
	cfg := testConfig(knftables.IPv4Family)
	for b.Loop() {
		views := scaleViews(10000, 10)
		fake := knftables.NewFake(cfg.Family, TableName)
		st := renderAll(cfg, views...)
		full := fake.NewTransaction()
		WriteFull(full, st)
		scripts := []string{full.String()}
		for i := range 5 {
			orig := views[1000+i]
			eps := append([]*model.Endpoint{ep("10.250.0.1", 8080, false)}, orig.ClusterEndpoints[1:]...)
			f := RenderService(cfg, view(orig.ServicePort, eps...))
			tx := fake.NewTransaction()
			st.Commit(planInto(tx, st, nil, map[model.ServicePortName]*Fragment{orig.Name: &f}, PlanOptions{}))
			scripts = append(scripts, tx.String())
		}
		// Delete one Service with affinity and a NodePort/LB (several chains and sets).
		tx := fake.NewTransaction()
		st.Commit(planInto(tx, st, nil, map[model.ServicePortName]*Fragment{views[0].Name: nil}, PlanOptions{}))
		scripts = append(scripts, tx.String())

		dir := b.TempDir()
		cmd := "set -e"
		for i, s := range scripts {
			path := filepath.Join(dir, "tx"+string(rune('a'+i))+".nft")
			if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
				b.Fatal(err)
			}
			// One line per script: its wall time in microseconds.
			cmd += "; s=$(date +%s%N); nft -f " + path + "; e=$(date +%s%N); echo $(( (e-s)/1000 ))"
		}
		out, err := exec.CommandContext(context.Background(), "unshare", "--net", "sh", "-c", cmd).CombinedOutput()
		if err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
		var us []float64
		for _, f := range strings.Fields(string(out)) {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				b.Fatalf("unexpected nft output %q", out)
			}
			us = append(us, v)
		}
		if len(us) != len(scripts) {
			b.Fatalf("%d timings for %d scripts: %q", len(us), len(scripts), out)
		}
		b.ReportMetric(us[0]/1000, "full-sync-ms")
		b.ReportMetric(slices.Max(us[1:len(us)-1])/1000, "endpoint-replaced-max-ms")
		b.ReportMetric(us[len(us)-1]/1000, "service-deleted-ms")
		b.ReportMetric(float64(full.NumOperations()), "full-sync-ops")
	}
}

// listingBlocks splits "nft list table" output into its chain, set and map blocks,
// sorted, each set's or map's elements sorted too: the order in which objects were
// created, and the order of elements, are not part of the ruleset.
func listingBlocks(out string) []string {
	var blocks []string
	var cur []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "chain "), strings.HasPrefix(line, "set "), strings.HasPrefix(line, "map "):
			cur = []string{line}
		case line == "}" && cur != nil:
			blocks = append(blocks, normalizeBlock(cur))
			cur = nil
		case cur != nil && line != "":
			cur = append(cur, line)
		}
	}
	slices.Sort(blocks)
	return blocks
}

// normalizeBlock joins a block's lines, sorting the elements of a set or map.
func normalizeBlock(lines []string) string {
	text := strings.Join(lines, "\n")
	head, elems, ok := strings.Cut(text, "elements = {")
	if !ok {
		return text
	}
	elems, tail, _ := strings.Cut(elems, "}")
	var list []string
	for _, e := range strings.Split(strings.ReplaceAll(elems, "\n", " "), ",") {
		if e = strings.Join(strings.Fields(e), " "); e != "" {
			list = append(list, e)
		}
	}
	slices.Sort(list)
	return head + "elements = {" + strings.Join(list, ", ") + "}" + tail
}
