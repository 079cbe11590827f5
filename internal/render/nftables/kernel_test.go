package nftables

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
)

// runInNetns runs the nft scripts, in order, in a network namespace of its own that
// disappears with the process, so the machine's ruleset is never touched.
func runInNetns(t *testing.T, scripts ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: loads rules with nft in a private network namespace")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs the nft binary")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare")
	}
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
				plan := st.Plan(delta, nil, updatesBetween(st, renderFragments(cfg, tc.after)), PlanOptions{DeferChainDeletes: deferDeletes})
				st.Commit(plan)
				scripts := []string{full.String(), delta.String()}
				if len(plan.StaleChains) > 0 {
					later := fake.NewTransaction()
					st.DeleteStaleChains(later, plan.StaleChains)
					scripts = append(scripts, later.String())
				}
				// Running the full sync again replaces the table atomically.
				scripts = append(scripts, full.String())
				runInNetns(t, scripts...)
			})
		}
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

// TestKernelTiming10k times nft -f of a full sync of 10,000 Services x 10 endpoints
// and of one-endpoint deltas on top, in a private network namespace. Opt-in
// (KPROXY_KERNEL_TIMING=1): it takes seconds and measures the machine, not the code.
func TestKernelTiming10k(t *testing.T) {
	if os.Getenv("KPROXY_KERNEL_TIMING") == "" {
		t.Skip("set KPROXY_KERNEL_TIMING=1 to run")
	}
	cfg := testConfig(knftables.IPv4Family)
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
		st.Commit(st.Plan(tx, nil, map[model.ServicePortName]*Fragment{orig.Name: &f}, PlanOptions{}))
		scripts = append(scripts, tx.String())
	}
	// Delete one Service with affinity and a NodePort/LB (several chains and sets).
	tx := fake.NewTransaction()
	st.Commit(st.Plan(tx, nil, map[model.ServicePortName]*Fragment{views[0].Name: nil}, PlanOptions{}))
	scripts = append(scripts, tx.String())

	dir := t.TempDir()
	cmd := "set -e"
	for i, s := range scripts {
		path := filepath.Join(dir, "tx"+string(rune('a'+i))+".nft")
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd += "; s=$(date +%s%N); nft -f " + path + "; e=$(date +%s%N); echo " + filepath.Base(path) + " $(( (e-s)/1000000 ))ms"
	}
	out, err := exec.CommandContext(context.Background(), "unshare", "--net", "sh", "-c", cmd).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("full sync: %d operations; nft -f times:\n%s", full.NumOperations(), out)
}
