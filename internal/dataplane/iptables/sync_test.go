package iptables

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kproxy/kproxy/internal/dataplane/dptest"
	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/metrics"
	"github.com/kproxy/kproxy/internal/nfacct"
	render "github.com/kproxy/kproxy/internal/render/iptables"
)

func TestFirstSyncIsFull(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.sync()

	if f.restores() != 1 || !f.lastWasFull() {
		t.Fatalf("first sync: %d restores, last:\n%s", f.restores(), f.lastRestore())
	}
	f.checkRulesAreFullRender(testRenderConfig())
	for _, j := range render.JumpRules() {
		if !f.ipt.HasChain(iptables.Table(j.Table), iptables.Chain(j.Target)) {
			t.Errorf("chain %s/%s missing", j.Table, j.Target)
		}
	}
	if n := f.histogram("kubeproxy_sync_full_proxy_rules_duration_seconds", dptest.IPv4Label); n != 1 {
		t.Errorf("full sync durations observed = %d, want 1", n)
	}
	if n := f.histogram("kubeproxy_sync_partial_proxy_rules_duration_seconds", dptest.IPv4Label); n != 0 {
		t.Errorf("partial sync durations observed = %d, want 0", n)
	}
	if got, want := f.metricValue("kubeproxy_sync_proxy_rules_last_timestamp_seconds", dptest.IPv4Label), float64(f.Clock.Now().Unix()); got != want {
		t.Errorf("last sync timestamp = %v, want %v", got, want)
	}
}

func TestNewTouchesNothing(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	for _, op := range []iptables.Op{iptables.OpRestore, iptables.OpSaveInto, iptables.OpEnsureChain, iptables.OpEnsureRule} {
		if n := f.ipt.Calls(op); n != 0 {
			t.Errorf("New called %s %d times", op, n)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	good := newFixture(t).proxier.cfg
	for name, mutate := range map[string]func(*Config){
		"no IPT":          func(c *Config) { c.IPT = nil },
		"no State":        func(c *Config) { c.State = nil },
		"family mismatch": func(c *Config) { c.Family = v1.IPv6Protocol },
		"bad masq bit":    func(c *Config) { c.Render.MasqueradeBit = 40 },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := good
			mutate(&cfg)
			if _, err := New(cfg); err == nil {
				t.Error("New accepted an invalid configuration")
			}
		})
	}
}

func TestEndpointChangeWritesOnlyDelta(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.sync()

	f.State.UpdateEndpointSlice(nil, dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP,
		dptest.Ready("10.0.1.1", testNodeName), dptest.Ready("10.0.2.1", "node-b"), dptest.Ready("10.0.3.1", "node-c")))
	f.sync()

	delta := f.lastRestore()
	if f.lastWasFull() || strings.Contains(delta, "*filter") {
		t.Fatalf("an endpoint change rewrote more than its chains:\n%s", delta)
	}
	// The KUBE-SVC chain (masquerade + 3 endpoint jumps) and the new KUBE-SEP chain.
	if got := strings.Count(delta, "\n-A "); got != 6 {
		t.Errorf("delta writes %d rules, want 6:\n%s", got, delta)
	}
	f.checkRulesAreFullRender(testRenderConfig())
	if n := f.histogram("kubeproxy_sync_partial_proxy_rules_duration_seconds", dptest.IPv4Label); n != 1 {
		t.Errorf("partial sync durations observed = %d, want 1", n)
	}
	if got := f.metricValue("kubeproxy_sync_proxy_rules_iptables_last", tableLabel("nat")); got != 6 {
		t.Errorf("iptables_last{nat} = %v, want 6", got)
	}
	if got := f.metricValue("kubeproxy_sync_proxy_rules_iptables_last", tableLabel("filter")); got != 0 {
		t.Errorf("iptables_last{filter} = %v, want 0", got)
	}

	// A Service added and another deleted: still a delta, still a full render.
	f.State.OnServiceAdd(dptest.Service("ns3", "new", "172.30.0.30", dptest.WithPort("", v1.ProtocolTCP, 443, 8443)))
	f.State.OnServiceDelete(dptest.Service("ns1", "web", "172.30.0.10", dptest.WithPort("http", v1.ProtocolTCP, 80, 8080)))
	f.sync()
	if f.lastWasFull() {
		t.Fatalf("a Service change rewrote everything")
	}
	f.checkRulesAreFullRender(testRenderConfig())
	f.checkRuleCounts()
}

// checkRuleCounts compares kubeproxy_sync_proxy_rules_iptables_total with the rules
// of kproxy's chains in the Fake.
func (f *fixture) checkRuleCounts() {
	f.t.Helper()
	for _, table := range []iptables.Table{iptables.TableFilter, iptables.TableNAT} {
		want := 0
		for _, chain := range f.ipt.Chains(table) {
			if strings.HasPrefix(string(chain), "KUBE-") {
				want += len(f.ipt.Rules(table, chain))
			}
		}
		if got := f.metricValue("kubeproxy_sync_proxy_rules_iptables_total", tableLabel(string(table))); got != float64(want) {
			f.t.Errorf("iptables_total{%s} = %v, want %d", table, got, want)
		}
	}
}

func TestSyncWithoutChangesRestoresNothing(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.sync()
	f.sync()
	f.sync()
	if got := f.restores(); got != 1 {
		t.Errorf("syncs without changes ran %d restores", got-1)
	}
	if got := f.Health.Count(v1.IPv4Protocol); got != 3 {
		t.Errorf("health Updated %d times, want once per successful sync (3)", got)
	}
	f.checkRuleCounts()
}

// TestPartialRestoreFailure: a failed partial restore is counted and followed, in
// the same Sync, by a full one.
func TestPartialRestoreFailure(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.sync()
	updates := f.Health.Count(v1.IPv4Protocol)

	f.State.UpdateEndpointSlice(nil, dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.3.1", "node-c")))
	f.ipt.FailNext(iptables.OpRestore, errInjected)
	f.sync()
	if !f.lastWasFull() {
		t.Errorf("the failed partial restore was not followed by a full one:\n%s", f.lastRestore())
	}
	f.checkRulesAreFullRender(testRenderConfig())
	if got := f.metricValue("kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total", dptest.IPv4Label); got != 1 {
		t.Errorf("partial restore failures = %v, want 1", got)
	}
	if got := f.metricValue("kubeproxy_sync_proxy_rules_iptables_restore_failures_total", dptest.IPv4Label); got != 1 {
		t.Errorf("restore failures = %v, want 1", got)
	}
	if got := f.Health.Count(v1.IPv4Protocol); got != updates+1 {
		t.Errorf("health Updated %d times, want %d", got, updates+1)
	}

	// Back to deltas afterwards.
	f.State.UpdateEndpointSlice(nil, dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.3.2", "node-c")))
	f.sync()
	if f.lastWasFull() {
		t.Errorf("the sync after the recovery was full")
	}
	f.checkRulesAreFullRender(testRenderConfig())
}

// TestDriftRepairedByFullSync: a shared-chain rule deleted behind our back makes
// the "-D" of the next partial restore fail; the full sync repairs everything.
func TestDriftRepairedByFullSync(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.sync()
	rules := f.ipt.Rules(iptables.TableNAT, render.ChainServices)
	var victim string
	for _, r := range rules {
		if strings.Contains(r, "ns1/web:http cluster IP") {
			victim = r
		}
	}
	drift := "*nat\n-D KUBE-SERVICES " + victim + "\nCOMMIT\n"
	if err := f.ipt.Restore(context.Background(), []byte(drift)); err != nil {
		t.Fatal(err)
	}
	f.State.OnServiceDelete(dptest.Service("ns1", "web", "172.30.0.10", dptest.WithPort("http", v1.ProtocolTCP, 80, 8080)))
	f.sync()
	if !f.lastWasFull() {
		t.Errorf("no full sync after the partial one failed")
	}
	f.checkRulesAreFullRender(testRenderConfig())
	if got := f.metricValue("kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total", dptest.IPv4Label); got != 1 {
		t.Errorf("partial restore failures = %v, want 1", got)
	}
}

func TestFailedFullRestore(t *testing.T) {
	for _, first := range []bool{true, false} {
		name := "later sync"
		if first {
			name = "first sync"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.AddStandardServices()
			if !first {
				f.sync()
			}
			updates := f.Health.Count(v1.IPv4Protocol)

			f.State.UpdateEndpointSlice(nil, dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.3.1", "node-c")))
			// The partial restore (if any) and the full one both fail.
			f.ipt.FailNext(iptables.OpRestore, errInjected)
			if !first {
				f.ipt.FailNext(iptables.OpRestore, errInjected)
			}
			_, err := f.proxier.Sync(context.Background())
			if !errors.Is(err, errInjected) {
				t.Fatalf("Sync error = %v, want the restore's error", err)
			}
			wantFailures, wantPartial := 2.0, 1.0
			if first {
				wantFailures, wantPartial = 1, 0
			}
			if got := f.metricValue("kubeproxy_sync_proxy_rules_iptables_restore_failures_total", dptest.IPv4Label); got != wantFailures {
				t.Errorf("restore failures = %v, want %v", got, wantFailures)
			}
			if got := f.metricValue("kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total", dptest.IPv4Label); got != wantPartial {
				t.Errorf("partial restore failures = %v, want %v", got, wantPartial)
			}
			if got := f.Health.Count(v1.IPv4Protocol); got != updates {
				t.Errorf("health Updated after a failed sync")
			}

			f.sync() // no new event: the retry alone must apply the change
			if !f.lastWasFull() {
				t.Errorf("the retry was not a full sync")
			}
			f.checkRulesAreFullRender(testRenderConfig())
			if !strings.Contains(f.ipt.Dump(iptables.TableNAT), "10.0.3.1:8080") {
				t.Errorf("the change of the failed sync is not in the rules")
			}
		})
	}
}

func TestJumpFailureFailsTheSync(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.ipt.FailNext(iptables.OpEnsureRule, errInjected)
	if _, err := f.proxier.Sync(context.Background()); !errors.Is(err, errInjected) {
		t.Fatalf("Sync error = %v, want the EnsureRule error", err)
	}
	if f.restores() != 0 {
		t.Errorf("rules were restored without their jumps")
	}
	f.sync()
	f.checkRulesAreFullRender(testRenderConfig())
}

// TestRequestFullSync: someone flushed the tables (the canary monitor noticed);
// the next sync rewrites everything, jumps included, even without a model change.
func TestRequestFullSync(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.sync()
	for _, table := range []iptables.Table{iptables.TableFilter, iptables.TableNAT} {
		for _, chain := range []iptables.Chain{iptables.ChainInput, iptables.ChainForward, iptables.ChainOutput,
			iptables.ChainPrerouting, iptables.ChainPostrouting, render.ChainServices} {
			if f.ipt.HasChain(table, chain) {
				if err := f.ipt.FlushChain(context.Background(), table, chain); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	f.proxier.RequestFullSync()
	f.sync()
	if !f.lastWasFull() {
		t.Fatalf("RequestFullSync did not lead to a full sync")
	}
	f.checkRulesAreFullRender(testRenderConfig())
}

func TestFullSyncPeriod(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.FullSyncPeriod = time.Minute })
	f.AddStandardServices()
	f.sync()

	f.Clock.Step(30 * time.Second)
	f.State.UpdateEndpointSlice(nil, dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.3.1", "node-c")))
	f.sync()
	if f.lastWasFull() {
		t.Fatalf("sync before FullSyncPeriod was full")
	}
	f.Clock.Step(30 * time.Second)
	runs := f.restores()
	f.sync() // no change, but FullSyncPeriod elapsed since the first sync
	if f.restores() != runs+1 || !f.lastWasFull() {
		t.Fatalf("no full sync after FullSyncPeriod")
	}
	f.checkRulesAreFullRender(testRenderConfig())
	f.Clock.Step(59 * time.Second)
	runs = f.restores()
	f.sync()
	if f.restores() != runs {
		t.Errorf("a sync within FullSyncPeriod of the last full sync restored")
	}
}

// TestLargeCluster: above the threshold, endpoint rules lose their comments (one
// full sync at the switch) and periodic full syncs stop, as upstream.
func TestLargeCluster(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.LargeClusterEndpoints = 5; c.FullSyncPeriod = time.Minute })
	f.AddStandardServices() // 5 endpoints
	f.sync()
	f.checkRulesAreFullRender(testRenderConfig())

	f.State.UpdateEndpointSlice(nil, dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP,
		dptest.Ready("10.0.1.1", testNodeName), dptest.Ready("10.0.2.1", "node-b"), dptest.Ready("10.0.3.1", "node-c")))
	f.sync()
	if !f.lastWasFull() {
		t.Errorf("crossing the threshold did not rewrite everything")
	}
	large := testRenderConfig()
	large.LargeCluster = true
	f.checkRulesAreFullRender(large)
	if strings.Contains(f.ipt.Dump(iptables.TableNAT), "-> 10.0.1.1:8080") {
		t.Errorf("endpoint comments kept in a large cluster")
	}

	f.Clock.Step(2 * time.Minute)
	runs := f.restores()
	f.sync()
	if f.restores() != runs {
		t.Errorf("periodic full sync in a large cluster")
	}

	f.State.OnServiceDelete(dptest.Service("ns1", "dns", "172.30.0.53", dptest.WithPort("dns", v1.ProtocolUDP, 53, 5353)))
	f.sync()
	if !f.lastWasFull() {
		t.Errorf("going back under the threshold did not rewrite everything")
	}
	f.checkRulesAreFullRender(testRenderConfig())
}

// TestStaleChainsOfAPreviousProxy: the first sync deletes per-Service chains that a
// previous kube-proxy left, and keeps other software's chains.
func TestStaleChainsOfAPreviousProxy(t *testing.T) {
	f := newFixture(t)
	leftover := "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-OLDOLDOLDOLDOLDO - [0:0]\n:KUBE-SEP-OLDOLDOLDOLDOLDO - [0:0]\n:CNI-HOSTPORT-DNAT - [0:0]\n" +
		"-A KUBE-SERVICES -d 172.30.9.9/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-OLDOLDOLDOLDOLDO\n" +
		"-A KUBE-SVC-OLDOLDOLDOLDOLDO -j KUBE-SEP-OLDOLDOLDOLDOLDO\n" +
		"-A KUBE-SEP-OLDOLDOLDOLDOLDO -p tcp -m tcp -j DNAT --to-destination 10.9.9.9:80\nCOMMIT\n"
	if err := f.ipt.Load(leftover); err != nil {
		t.Fatal(err)
	}
	f.AddStandardServices()
	f.sync()
	if f.ipt.HasChain(iptables.TableNAT, "KUBE-SVC-OLDOLDOLDOLDOLDO") || f.ipt.HasChain(iptables.TableNAT, "KUBE-SEP-OLDOLDOLDOLDOLDO") {
		t.Errorf("stale chains of a previous proxy kept:\n%s", f.ipt.Dump(iptables.TableNAT))
	}
	if !f.ipt.HasChain(iptables.TableNAT, "CNI-HOSTPORT-DNAT") {
		t.Errorf("another program's chain deleted")
	}
	f.checkRulesAreFullRender(testRenderConfig())
}

func TestSaveFailureKeepsSyncing(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.ipt.FailNext(iptables.OpSaveInto, errInjected)
	f.sync()
	f.checkRulesAreFullRender(testRenderConfig())
}

func TestServiceHealth(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.sync()
	lb := types.NamespacedName{Namespace: "ns2", Name: "lb"}
	if len(f.SvcHealth.Services) != 1 || f.SvcHealth.Services[0][lb] != 30999 {
		t.Fatalf("SyncServices calls = %v, want one with {ns2/lb: 30999}", f.SvcHealth.Services)
	}
	if !strings.Contains(f.ipt.Dump(iptables.TableFilter), "--dport 30999 -j ACCEPT") {
		t.Errorf("the health check node port is not accepted in filter KUBE-NODEPORTS")
	}
	f.State.OnServiceUpdate(nil, dptest.Service("ns2", "lb", "172.30.0.20", dptest.WithPort("http", v1.ProtocolTCP, 80, 8080),
		dptest.AsLoadBalancer("1.2.3.4", 30080, true, 30998)))
	f.ipt.FailNext(iptables.OpRestore, errInjected)
	f.ipt.FailNext(iptables.OpRestore, errInjected)
	if _, err := f.proxier.Sync(context.Background()); err == nil {
		t.Fatal("Sync succeeded despite the failed restores")
	}
	f.sync()
	if last := f.SvcHealth.Services[len(f.SvcHealth.Services)-1]; last[lb] != 30998 {
		t.Errorf("after recovering from a failed sync, health check ports = %v, want {ns2/lb: 30998}", last)
	}
}

func TestDefaults(t *testing.T) {
	f := newFixture(t)
	if f.proxier.cfg.FullSyncPeriod != DefaultFullSyncPeriod || f.proxier.cfg.LargeClusterEndpoints != DefaultLargeClusterEndpoints {
		t.Errorf("defaults not applied: %+v", f.proxier.cfg)
	}
}

// Full syncs create the nfacct counters, and the rules count into them; when the
// counters cannot be created the rules leave them out (a rule naming a missing
// counter would fail the whole restore), and a later full sync adds them.
func TestNFAcctCounters(t *testing.T) {
	counters := nfacct.NewFake()
	counters.Err = errors.New("nfnetlink_acct unavailable")
	f := newFixture(t, func(c *Config) {
		c.NFAcct = counters
		c.Render.LocalhostNodePorts = true
	})
	f.State.OnServiceAdd(dptest.Service("ns1", "np", "172.30.0.50", dptest.WithPort("http", v1.ProtocolTCP, 80, 8080), dptest.AsLoadBalancer("192.0.2.50", 30080, false, 0)))
	f.State.AddEndpointSlice(dptest.Slice("ns1", "np", "np-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.1.1", "node-b")))
	f.sync()
	if strings.Contains(f.lastRestore(), "-m nfacct") {
		t.Fatalf("rules name nfacct counters that could not be created:\n%s", f.lastRestore())
	}

	counters.Err = nil
	f.proxier.RequestFullSync()
	f.sync()
	restore := f.lastRestore()
	for _, name := range []string{metrics.IPTablesCTStateInvalidDroppedNFAcctCounter, metrics.LocalhostNodePortAcceptedNFAcctCounter} {
		if _, err := counters.Get(name); err != nil {
			t.Errorf("counter %s: %v", name, err)
		}
		if !strings.Contains(restore, "-m nfacct --nfacct-name "+name) {
			t.Errorf("no rule counts into %s:\n%s", name, restore)
		}
	}
	f.checkRulesAreFullRender(func() render.Config {
		cfg := testRenderConfig()
		cfg.LocalhostNodePorts, cfg.CountInvalidDrops, cfg.CountLocalhostNodePorts = true, true, true
		return cfg
	}())
}

// TestPrecommit: changes committed ahead of the first sync (model.Precommitter) are
// written by it, and Precommit leaves later changes to Sync.
func TestPrecommit(t *testing.T) {
	f := newFixture(t)
	f.State.OnServiceAdd(dptest.Service("ns1", "web", "172.30.0.10", dptest.WithPort("http", v1.ProtocolTCP, 80, 8080)))
	f.proxier.Precommit()
	f.State.AddEndpointSlice(dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.1.1", testNodeName)))
	f.proxier.Precommit()
	if services, endpoints := f.State.Pending(); services != 0 || endpoints != 0 || f.restores() != 0 {
		t.Fatalf("Precommit left %d/%d pending changes or restored (%d restores)", services, endpoints, f.restores())
	}
	f.sync()
	f.checkRulesAreFullRender(testRenderConfig())
	if !strings.Contains(f.lastRestore(), "10.0.1.1:8080") {
		t.Errorf("the first sync did not write the precommitted endpoint:\n%s", f.lastRestore())
	}

	f.State.OnServiceDelete(dptest.Service("ns1", "web", "172.30.0.10", dptest.WithPort("http", v1.ProtocolTCP, 80, 8080)))
	f.proxier.Precommit()
	if services, _ := f.State.Pending(); services != 1 {
		t.Fatalf("after the first sync, Precommit consumed the model's pending changes (%d Service changes left, want 1)", services)
	}
	f.sync()
	f.checkRulesAreFullRender(testRenderConfig())
}
