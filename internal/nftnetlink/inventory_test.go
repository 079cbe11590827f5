package nftnetlink

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/drift"
	"github.com/kproxy/kproxy/internal/nft"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// compare returns the differences between the inventory of what st renders and
// the kernel's table, as strings.
func compare(t *testing.T, ex *Executor, st *render.State) []string {
	t.Helper()
	want, err := ex.InventoryOf(render.FullOps(st))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ex.ReadInventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var r drift.Report
	if err := CompareInventories(context.Background(), want, got, &r); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range r.Differences {
		out = append(out, d.String())
	}
	return out
}

// TestInventoryOfWrittenTableMatchesKernel: for every expected-output case of the
// renderer, in both families, the inventory of the written operations equals the
// kernel's table read back, so that drift detection reports nothing when nobody
// changed the table (canon.go's normalisations are complete for what kproxy
// writes).
func TestInventoryOfWrittenTableMatchesKernel(t *testing.T) {
	needRoot(t)
	ns := testNetns(t)
	for _, c := range renderCases() {
		t.Run(c.name, func(t *testing.T) {
			ex, err := New(c.family, render.TableName, Options{NetNSPath: netnsPath(ns)})
			if err != nil {
				t.Fatal(err)
			}
			cfg, views := c.build()
			st := renderState(cfg, views)
			if err := ex.RunOps(context.Background(), render.FullOps(st)); err != nil {
				t.Fatal(err)
			}
			if diffs := compare(t, ex, st); len(diffs) > 0 {
				t.Errorf("differences right after writing:\n%s", strings.Join(diffs, "\n"))
			}
		})
	}
}

// TestInventoryAfterPartialSyncs: after each of the renderer's plan scenarios
// (partial syncs adding, changing and deleting ServicePorts), the kernel matches
// the inventory of the applied state's full rendering.
func TestInventoryAfterPartialSyncs(t *testing.T) {
	needRoot(t)
	ns := testNetns(t)
	cfg := testConfig(knftables.IPv4Family)
	ex, err := New(cfg.Family, render.TableName, Options{NetNSPath: netnsPath(ns)})
	if err != nil {
		t.Fatal(err)
	}
	steps, st := deltaStepsOn(cfg, 200)
	// inc follows the steps' operations (ApplyToInventory), as the proxier keeps
	// the inventory of what it applied between full syncs.
	inc, err := ex.InventoryOf(func(func(nft.Op) bool) {})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		ops, commit := s.write()
		if err := ex.RunOps(context.Background(), slices.Values(ops)); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		commit()
		if err := ex.ApplyToInventory(inc, slices.Values(ops)); err != nil {
			t.Fatalf("%s: ApplyToInventory: %v", s.name, err)
		}
		if strings.Contains(s.name, "deferred") {
			continue // the stale chains are still there until the next step deletes them
		}
		if diffs := compare(t, ex, st); len(diffs) > 0 {
			t.Errorf("%s: differences:\n%s", s.name, strings.Join(diffs, "\n"))
		}
		got, err := ex.ReadInventory(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var r drift.Report
		if err := CompareInventories(context.Background(), inc, got, &r); err != nil {
			t.Fatal(err)
		}
		for _, d := range r.Differences {
			t.Errorf("%s: the inventory kept up by ApplyToInventory differs from the kernel: %s", s.name, d)
		}
	}
}

// TestInventoryFindsThirdPartyChanges: what another program does to the table is
// reported as the difference it is.
func TestInventoryFindsThirdPartyChanges(t *testing.T) {
	needRoot(t)
	cfg := testConfig(knftables.IPv4Family)
	st := renderState(cfg, scaleViews(3, 2))
	svcChain := ""
	for op := range render.FullOps(st) {
		if op.Kind == nft.AddChain && strings.HasPrefix(op.Name, "service-") {
			svcChain = op.Name
			break
		}
	}
	if svcChain == "" {
		t.Fatal("no service chain rendered")
	}
	for _, tc := range []struct {
		name   string
		script string
		want   []string
	}{
		{"table deleted", "delete table ip kube-proxy", []string{"missing table "}},
		{"chain flushed", "flush chain ip kube-proxy " + svcChain, []string{"changed rule " + svcChain + ": "}},
		{"rule added", "add rule ip kube-proxy " + svcChain + " counter", []string{"changed rule " + svcChain + ": "}},
		{"chain added", "add chain ip kube-proxy intruder", []string{"extra chain intruder"}},
		{"element deleted", "flush map ip kube-proxy service-ips", []string{"changed element service-ips: "}},
		{"set added", "add set ip kube-proxy intruder { type ipv4_addr; }", []string{"extra set intruder"}},
		{"base chain deleted", "flush chain ip kube-proxy filter-forward; delete chain ip kube-proxy filter-forward",
			[]string{"missing chain filter-forward"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := testNetns(t)
			ex, err := New(cfg.Family, render.TableName, Options{NetNSPath: netnsPath(ns)})
			if err != nil {
				t.Fatal(err)
			}
			if err := ex.RunOps(context.Background(), render.FullOps(st)); err != nil {
				t.Fatal(err)
			}
			if out, err := nftIn(ns, tc.script+"\n"); err != nil {
				t.Fatalf("nft: %v\n%s", err, out)
			}
			diffs := compare(t, ex, st)
			if len(diffs) != len(tc.want) {
				t.Fatalf("differences:\n%s\nwant %d starting with %q", strings.Join(diffs, "\n"), len(tc.want), tc.want)
			}
			for i, d := range diffs {
				if !strings.HasPrefix(d, tc.want[i]) {
					t.Errorf("difference %d: %q, want it to start with %q", i, d, tc.want[i])
				}
			}
		})
	}
}

// TestGenerationChanges: the ruleset generation moves with every transaction.
func TestGenerationChanges(t *testing.T) {
	ns, ex := testExecutor(t)
	g1, err := ex.Generation(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out, err := nftIn(ns, "add table ip other\n"); err != nil {
		t.Fatalf("nft: %v\n%s", err, out)
	}
	g2, err := ex.Generation(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if g1 == g2 {
		t.Errorf("generation %d before and after a transaction", g1)
	}
	exists, err := ex.TableExists(context.Background())
	if err != nil || exists {
		t.Errorf("TableExists before any write = %t, %v; want false", exists, err)
	}
}

// TestInventoryOfNftWrittenTable: a table written by the nft command (the
// fallback writer) also reads back as the inventory of the operations, so that
// drift detection reports nothing for it either.
func TestInventoryOfNftWrittenTable(t *testing.T) {
	needRoot(t)
	ns := testNetns(t)
	for _, c := range renderCases() {
		t.Run(c.name, func(t *testing.T) {
			ex, err := New(c.family, render.TableName, Options{NetNSPath: netnsPath(ns)})
			if err != nil {
				t.Fatal(err)
			}
			cfg, views := c.build()
			st := renderState(cfg, views)
			text := nft.AppendScript(nil, render.FullOps(st), ex.nftFamily(), render.TableName)
			if out, err := nftIn(ns, string(text)); err != nil {
				t.Fatalf("nft -f: %v\n%s", err, out)
			}
			if diffs := compare(t, ex, st); len(diffs) > 0 {
				t.Errorf("differences right after nft wrote the table:\n%s", strings.Join(diffs, "\n"))
			}
		})
	}
}

// TestRunOpsInventoryMatchesKernel: the inventory a full sync reads from its own
// batch (RunOpsInventory) equals the one of its operations encoded again
// (InventoryOf) and the kernel's table read back, both when the sync replaces an
// absent table and when it refreshes one that holds another case's objects
// (flushed or deleted when stale, which the inventory must not keep).
func TestRunOpsInventoryMatchesKernel(t *testing.T) {
	needRoot(t)
	ns := testNetns(t)
	cases := renderCases()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ex, err := New(c.family, render.TableName, Options{NetNSPath: netnsPath(ns)})
			if err != nil {
				t.Fatal(err)
			}
			cfg, views := c.build()
			st := renderState(cfg, views)
			// Another case of the same family first, so that the refresh has stale
			// objects to remove.
			prev := cases[(i+1)%len(cases)]
			for prev.family != c.family {
				i++
				prev = cases[(i+1)%len(cases)]
			}
			pcfg, pviews := prev.build()
			ctx := context.Background()
			for _, step := range []struct {
				name string
				ops  func(existing *Inventory) iter.Seq[nft.Op]
			}{
				{"replace", func(*Inventory) iter.Seq[nft.Op] { return render.FullOps(st) }},
				{"refresh", func(k *Inventory) iter.Seq[nft.Op] { return render.RefreshOps(st, existingOf(k)) }},
			} {
				if err := ex.RunOps(ctx, render.FullOps(renderState(pcfg, pviews))); err != nil {
					t.Fatal(err)
				}
				before, err := ex.ReadInventory(ctx)
				if err != nil {
					t.Fatal(err)
				}
				got, err := ex.RunOpsInventory(ctx, step.ops(before))
				if err != nil {
					t.Fatalf("%s: %v", step.name, err)
				}
				want, err := ex.InventoryOf(render.FullOps(st))
				if err != nil {
					t.Fatal(err)
				}
				kernel, err := ex.ReadInventory(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, against := range []struct {
					name string
					inv  *Inventory
				}{{"InventoryOf", want}, {"the kernel", kernel}} {
					var r drift.Report
					if err := CompareInventories(context.Background(), got, against.inv, &r); err != nil {
						t.Fatal(err)
					}
					if r.Count > 0 {
						var diffs []string
						for _, d := range r.Differences {
							diffs = append(diffs, d.String())
						}
						t.Errorf("%s: the batch's inventory differs from %s's:\n%s", step.name, against.name, strings.Join(diffs, "\n"))
					}
				}
			}
		})
	}
}

// existingOf lists what inv holds as render.Existing, for a refresh.
func existingOf(inv *Inventory) *render.Existing {
	e := &render.Existing{}
	for name := range inv.Chains {
		e.Chains = append(e.Chains, name)
	}
	for name, s := range inv.Sets {
		if s.Map {
			e.Maps = append(e.Maps, name)
		} else {
			e.Sets = append(e.Sets, name)
		}
	}
	for name := range inv.Counters {
		e.Counters = append(e.Counters, name)
	}
	slices.Sort(e.Chains)
	slices.Sort(e.Sets)
	slices.Sort(e.Maps)
	slices.Sort(e.Counters)
	return e
}

// TestCountElements counts a map's elements across many dump parts (more than one
// 64 KiB read), and reports a missing set as an error rather than 0.
func TestCountElements(t *testing.T) {
	ns, ex := testExecutor(t)
	ctx := context.Background()
	if n, err := ex.CountElements(ctx, "service-ips"); err == nil {
		t.Fatalf("count without a table = %d, want an error", n)
	}
	const elements = 3000
	var script strings.Builder
	script.WriteString("add table ip kube-proxy\nadd chain ip kube-proxy svc\n")
	script.WriteString("add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }\n")
	for i := range elements {
		fmt.Fprintf(&script, "add element ip kube-proxy service-ips { 198.51.%d.%d . tcp . 80 : goto svc }\n", i/250, i%250+1)
	}
	if out, err := nftIn(ns, script.String()); err != nil {
		t.Fatalf("nft: %v\n%s", err, out)
	}
	if n, err := ex.CountElements(ctx, "service-ips"); err != nil || n != elements {
		t.Fatalf("CountElements = %d, %v; want %d", n, err, elements)
	}
	if n, err := ex.CountElements(ctx, "no-such-map"); err == nil {
		t.Fatalf("count of a missing map = %d, want an error", n)
	}
}
