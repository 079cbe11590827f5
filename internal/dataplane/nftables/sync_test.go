package nftables

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/dataplane/dptest"
)

// lastWasFullRewrite reports whether the last transaction was a full sync, which
// adds the table first and then refreshes or replaces all of it (a partial sync
// never adds the table).
func (f *fixture) lastWasFullRewrite() bool {
	f.nft.RLock()
	defer f.nft.RUnlock()
	return f.nft.LastTransaction != nil && strings.HasPrefix(f.nft.LastTransaction.String(), "add table ip kube-proxy")
}

// lastReplacedTable reports whether the last transaction deleted and recreated the
// table (a full sync's fallback when a refresh is refused).
func (f *fixture) lastReplacedTable() bool {
	f.nft.RLock()
	defer f.nft.RUnlock()
	return f.nft.LastTransaction != nil && strings.Contains(f.nft.LastTransaction.String(), "delete table ip kube-proxy")
}

func TestFirstSyncIsFull(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.sync()

	if !f.lastWasFullRewrite() {
		t.Errorf("first sync did not replace the table:\n%s", f.nft.LastTransaction)
	}
	f.checkTableIsFullRender(testRenderConfig())
	if n, _ := f.histogram("kubeproxy_sync_full_proxy_rules_duration_seconds", dptest.IPv4Label); n != 1 {
		t.Errorf("full sync durations observed = %d, want 1", n)
	}
	if n, _ := f.histogram("kubeproxy_sync_partial_proxy_rules_duration_seconds", dptest.IPv4Label); n != 0 {
		t.Errorf("partial sync durations observed = %d, want 0", n)
	}
	if n, _ := f.histogram("kubeproxy_sync_proxy_rules_duration_seconds", dptest.IPv4Label); n != 1 {
		t.Errorf("sync durations observed = %d, want 1", n)
	}
	if got, want := f.metricValue("kubeproxy_sync_proxy_rules_last_timestamp_seconds", dptest.IPv4Label), float64(f.Clock.Now().Unix()); got != want {
		t.Errorf("last sync timestamp = %v, want %v", got, want)
	}
}

func TestNewTouchesNothing(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	if f.nft.runs() != 0 || f.nft.Dump() != "" {
		t.Errorf("New ran %d transactions; table:\n%s", f.nft.runs(), f.nft.Dump())
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	good := newFixture(t).proxier.cfg
	for name, mutate := range map[string]func(*Config){
		"no NFT":        func(c *Config) { c.NFT = nil },
		"no State":      func(c *Config) { c.State = nil },
		"bad family":    func(c *Config) { c.Render.Family = "inet" },
		"bad CIDR":      func(c *Config) { c.Render.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("fd00::/64")} },
		"bad masq bit ": func(c *Config) { c.Render.MasqueradeBit = 40 },
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
	fullOps := f.nft.lastOperations()

	f.State.UpdateEndpointSlice(nil, dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP,
		dptest.Ready("10.0.1.1", testNodeName), dptest.Ready("10.0.2.1", "node-b"), dptest.Ready("10.0.3.1", "node-c")))
	f.sync()

	if f.lastWasFullRewrite() {
		t.Fatalf("an endpoint change rewrote the whole table:\n%s", f.nft.LastTransaction)
	}
	// A third endpoint: the selection rule is rewritten for "mod 3" (flush + 1 rule)
	// and the endpoint map gains one element.
	if got := f.nft.lastOperations(); got != 3 {
		t.Errorf("delta has %d operations, want 3 (full sync had %d):\n%s", got, fullOps, f.nft.LastTransaction)
	}
	f.checkTableIsFullRender(testRenderConfig())
	if n, _ := f.histogram("kubeproxy_sync_partial_proxy_rules_duration_seconds", dptest.IPv4Label); n != 1 {
		t.Errorf("partial sync durations observed = %d, want 1", n)
	}

	// A Service added and another deleted: still a delta, still equal to a full render.
	f.State.OnServiceAdd(dptest.Service("ns3", "new", "172.30.0.30", dptest.WithPort("", v1.ProtocolTCP, 443, 8443)))
	f.State.OnServiceDelete(dptest.Service("ns1", "web", "172.30.0.10", dptest.WithPort("http", v1.ProtocolTCP, 80, 8080)))
	f.sync()
	if f.lastWasFullRewrite() {
		t.Fatalf("a Service change rewrote the whole table")
	}
	f.checkTableIsFullRender(testRenderConfig())
}

func TestSyncWithoutChangesRunsNoTransaction(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.sync()
	runs := f.nft.runs()
	f.sync()
	f.sync()
	if got := f.nft.runs(); got != runs {
		t.Errorf("syncs without changes ran %d transactions", got-runs)
	}
	if got := f.Health.Count(v1.IPv4Protocol); got != 3 {
		t.Errorf("health Updated %d times, want once per successful sync (3)", got)
	}
	if n, _ := f.histogram("kubeproxy_sync_proxy_rules_duration_seconds", dptest.IPv4Label); n != 3 {
		t.Errorf("sync durations observed = %d, want 3", n)
	}
}

func TestFailedTransaction(t *testing.T) {
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
			before := normalizeDump(f.nft.Dump())
			updates := f.Health.Count(v1.IPv4Protocol)

			f.State.UpdateEndpointSlice(nil, dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP,
				dptest.Ready("10.0.3.1", "node-c")))
			f.nft.failNext = 1
			if first {
				// A full sync whose refresh of the table is refused replaces it
				// instead: both must fail for the sync to fail.
				f.nft.failNext = 2
			}
			_, err := f.proxier.Sync(context.Background())
			if !errors.Is(err, errInjected) {
				t.Fatalf("Sync error = %v, want the transaction's error", err)
			}
			if got := f.metricValue("kubeproxy_sync_proxy_rules_nftables_sync_failures_total", dptest.IPv4Label); got != 1 {
				t.Errorf("sync failures = %v, want 1", got)
			}
			if got := f.Health.Count(v1.IPv4Protocol); got != updates {
				t.Errorf("health Updated after a failed sync")
			}
			if got := normalizeDump(f.nft.Dump()); got != before {
				t.Errorf("failed transaction changed the table")
			}

			f.sync() // no new event: the retry alone must apply the change
			if !f.lastWasFullRewrite() {
				t.Errorf("the sync after a failure was not a full rewrite:\n%s", f.nft.LastTransaction)
			}
			f.checkTableIsFullRender(testRenderConfig())
			if !strings.Contains(f.nft.Dump(), "10.0.3.1 . 8080") {
				t.Errorf("the change of the failed sync is not in the table")
			}
			if got := f.metricValue("kubeproxy_sync_proxy_rules_nftables_sync_failures_total", dptest.IPv4Label); got != 1 {
				t.Errorf("sync failures = %v after recovery, want 1", got)
			}
			if got := f.Health.Count(v1.IPv4Protocol); got != updates+1 {
				t.Errorf("health Updated %d times after the recovery, want %d", got, updates+1)
			}

			// Back to deltas afterwards.
			f.State.UpdateEndpointSlice(nil, dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP,
				dptest.Ready("10.0.3.2", "node-c")))
			f.sync()
			if f.lastWasFullRewrite() {
				t.Errorf("the sync after the recovery was a full rewrite")
			}
			f.checkTableIsFullRender(testRenderConfig())
		})
	}
}

func TestFullSyncPeriod(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.FullSyncPeriod = time.Minute })
	f.AddStandardServices()
	f.sync()

	f.Clock.Step(30 * time.Second)
	f.State.UpdateEndpointSlice(nil, dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.3.1", "node-c")))
	f.sync()
	if f.lastWasFullRewrite() {
		t.Fatalf("sync before FullSyncPeriod was full")
	}

	// Something rewrote the table behind our back; the periodic full sync repairs it.
	tx := f.nft.NewTransaction()
	tx.Flush(&knftables.Chain{Name: "services"})
	if err := f.nft.Fake.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}

	f.Clock.Step(30 * time.Second)
	runs := f.nft.runs()
	f.sync() // no change, but FullSyncPeriod elapsed since the first sync
	if f.nft.runs() != runs+1 || !f.lastWasFullRewrite() {
		t.Fatalf("no full rewrite after FullSyncPeriod")
	}
	f.checkTableIsFullRender(testRenderConfig())
	if n, _ := f.histogram("kubeproxy_sync_full_proxy_rules_duration_seconds", dptest.IPv4Label); n != 2 {
		t.Errorf("full sync durations observed = %d, want 2", n)
	}

	f.Clock.Step(59 * time.Second)
	runs = f.nft.runs()
	f.sync()
	if f.nft.runs() != runs {
		t.Errorf("a sync within FullSyncPeriod of the last full sync ran a transaction")
	}
}

func TestDefaultFullSyncPeriod(t *testing.T) {
	f := newFixture(t)
	if f.proxier.cfg.FullSyncPeriod != DefaultFullSyncPeriod {
		t.Errorf("FullSyncPeriod = %v, want %v", f.proxier.cfg.FullSyncPeriod, DefaultFullSyncPeriod)
	}
}

func TestSetServiceCIDRs(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.sync()

	cidrs := []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16"), netip.MustParsePrefix("172.31.0.0/16")}
	f.proxier.SetServiceCIDRs(cidrs)
	f.sync()
	if f.lastWasFullRewrite() {
		t.Errorf("a ServiceCIDR change rewrote the whole table")
	}
	rules := clusterIPsCheckRules(t, f)
	if !strings.Contains(rules, "{ 172.30.0.0/16, 172.31.0.0/16 } drop") {
		t.Errorf("cluster-ips-check does not drop the new ServiceCIDRs:\n%s", rules)
	}
	want := testRenderConfig()
	want.ServiceCIDRs = cidrs
	f.checkTableIsFullRender(want)

	// The same CIDRs again change nothing.
	runs := f.nft.runs()
	f.proxier.SetServiceCIDRs([]netip.Prefix{netip.MustParsePrefix("172.30.0.0/16"), netip.MustParsePrefix("172.31.0.0/16")})
	f.sync()
	if f.nft.runs() != runs {
		t.Errorf("setting unchanged ServiceCIDRs ran a transaction")
	}

	// No CIDRs: no drop rule at all.
	f.proxier.SetServiceCIDRs(nil)
	f.sync()
	if rules := clusterIPsCheckRules(t, f); strings.Contains(rules, "drop") {
		t.Errorf("cluster-ips-check still drops without ServiceCIDRs:\n%s", rules)
	}
	want.ServiceCIDRs = nil
	f.checkTableIsFullRender(want)
}

func TestSetServiceCIDRsBeforeFirstSync(t *testing.T) {
	f := newFixture(t)
	cidrs := []netip.Prefix{netip.MustParsePrefix("172.31.0.0/16")}
	f.proxier.SetServiceCIDRs(cidrs)
	f.sync()
	want := testRenderConfig()
	want.ServiceCIDRs = cidrs
	f.checkTableIsFullRender(want)
}

func clusterIPsCheckRules(t *testing.T, f *fixture) string {
	t.Helper()
	rules, err := f.nft.ListRules(context.Background(), "cluster-ips-check")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rules {
		out = append(out, r.Rule)
	}
	return strings.Join(out, "\n")
}

func TestServiceHealth(t *testing.T) {
	f := newFixture(t)
	f.AddStandardServices()
	f.sync()
	lb := types.NamespacedName{Namespace: "ns2", Name: "lb"}
	if len(f.SvcHealth.Services) != 1 || len(f.SvcHealth.Services[0]) != 1 || f.SvcHealth.Services[0][lb] != 30999 {
		t.Fatalf("SyncServices calls = %v, want one with {ns2/lb: 30999}", f.SvcHealth.Services)
	}
	if len(f.SvcHealth.Endpoints) != 1 {
		t.Fatalf("SyncEndpoints called %d times, want 1", len(f.SvcHealth.Endpoints))
	}
	eps := f.SvcHealth.Endpoints[0]
	if eps[types.NamespacedName{Namespace: "ns1", Name: "web"}] != 1 || eps[lb] != 0 {
		t.Errorf("SyncEndpoints(%v): want 1 local endpoint for ns1/web and none for ns2/lb", eps)
	}

	// An endpoint change does not resync the health check services.
	f.State.UpdateEndpointSlice(nil, dptest.Slice("ns2", "lb", "lb-1", 8080, "http", v1.ProtocolTCP,
		dptest.Ready("10.0.2.3", "node-b"), dptest.Ready("10.0.1.3", testNodeName)))
	f.sync()
	if len(f.SvcHealth.Services) != 1 {
		t.Errorf("SyncServices called again without a health check node port change")
	}
	if last := f.SvcHealth.Endpoints[len(f.SvcHealth.Endpoints)-1]; last[lb] != 1 {
		t.Errorf("SyncEndpoints(%v): want 1 local endpoint for ns2/lb", last)
	}

	// A new healthCheckNodePort is passed on.
	f.State.OnServiceUpdate(nil, dptest.Service("ns2", "lb", "172.30.0.20", dptest.WithPort("http", v1.ProtocolTCP, 80, 8080),
		dptest.AsLoadBalancer("1.2.3.4", 30080, true, 30998)))
	f.sync()
	if n := len(f.SvcHealth.Services); n != 2 || f.SvcHealth.Services[1][lb] != 30998 {
		t.Errorf("SyncServices calls = %v, want a second one with {ns2/lb: 30998}", f.SvcHealth.Services)
	}
}

// The FullSync hook brackets every full sync, transaction included, and no partial
// sync.
func TestFullSyncHook(t *testing.T) {
	var entered, left int
	var runsAtEntry, runsAtExit []int
	var f *fixture
	f = newFixture(t, func(c *Config) {
		c.FullSyncPeriod = time.Minute
		c.FullSync = func() func() {
			entered++
			runsAtEntry = append(runsAtEntry, f.nft.runs())
			return func() {
				left++
				runsAtExit = append(runsAtExit, f.nft.runs())
			}
		}
	})
	f.AddStandardServices()
	f.sync()
	if entered != 1 || left != 1 || runsAtEntry[0] != 0 || runsAtExit[0] != 1 {
		t.Fatalf("first (full) sync: entered %d, left %d, transactions at entry %v and exit %v; want 1, 1, [0], [1]", entered, left, runsAtEntry, runsAtExit)
	}
	f.State.UpdateEndpointSlice(nil, dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.3.1", "node-c")))
	f.sync()
	if f.lastWasFullRewrite() || entered != 1 {
		t.Fatalf("partial sync: full rewrite %t, hook entered %d times; want false, 1", f.lastWasFullRewrite(), entered)
	}
	f.Clock.Step(time.Minute)
	f.sync()
	if !f.lastWasFullRewrite() || entered != 2 || left != 2 {
		t.Errorf("periodic full sync: full rewrite %t, entered %d, left %d; want true, 2, 2", f.lastWasFullRewrite(), entered, left)
	}
}

// affinityService is a ClusterIP Service with ClientIP affinity and two endpoints.
func addAffinityService(f *fixture) {
	svc := dptest.Service("ns1", "sticky", "172.30.0.30", dptest.WithPort("http", v1.ProtocolTCP, 80, 8080))
	svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: new(int32(600))}}
	f.State.OnServiceAdd(svc)
	f.State.AddEndpointSlice(dptest.Slice("ns1", "sticky", "sticky-1", 8080, "http", v1.ProtocolTCP,
		dptest.Ready("10.0.5.1", "node-b"), dptest.Ready("10.0.5.2", "node-b")))
}

// affinitySet returns the name of a session-affinity set of the table.
func (f *fixture) affinitySet() string {
	f.t.Helper()
	sets, err := f.nft.List(context.Background(), "sets")
	if err != nil {
		f.t.Fatal(err)
	}
	for _, s := range sets {
		if strings.HasPrefix(s, "affinity-") {
			return s
		}
	}
	f.t.Fatalf("no affinity set among %v", sets)
	return ""
}

// A periodic full sync refreshes the table in place: session-affinity memory
// stored by the packet path survives it (as upstream keeps it), while anything
// else foreign to the render is removed.
func TestFullSyncKeepsAffinity(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.FullSyncPeriod = time.Minute })
	f.AddStandardServices()
	addAffinityService(f)
	f.sync()
	set := f.affinitySet()
	tx := f.nft.NewTransaction()
	tx.Add(&knftables.Element{Set: set, Key: []string{"10.9.0.1"}})
	tx.Add(&knftables.Chain{Name: "foreign"})
	if err := f.nft.Fake.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}

	f.Clock.Step(time.Minute)
	f.sync()
	if !f.lastWasFullRewrite() || f.lastReplacedTable() {
		t.Fatalf("periodic full sync: full %t, replaced the table %t; want a refresh", f.lastWasFullRewrite(), f.lastReplacedTable())
	}
	elems, err := f.nft.ListElements(context.Background(), "set", set)
	if err != nil || len(elems) != 1 || elems[0].Key[0] != "10.9.0.1" {
		t.Errorf("affinity set after the refresh: %v, %v; want the stored client 10.9.0.1", elems, err)
	}
	tx = f.nft.NewTransaction()
	tx.Flush(&knftables.Set{Name: set})
	if err := f.nft.Fake.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	f.checkTableIsFullRender(testRenderConfig())
}

// When the kernel refuses the refresh (say a base chain's hook changed), the same
// sync replaces the table instead, and the sync succeeds without counting a failure.
func TestRefusedRefreshReplacesTable(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.FullSyncPeriod = time.Minute })
	f.AddStandardServices()
	f.sync()
	f.Clock.Step(time.Minute)
	runs := f.nft.runs()
	f.nft.failNext = 1
	f.sync()
	if f.nft.runs() != runs+2 || !f.lastReplacedTable() {
		t.Fatalf("after a refused refresh: %d transactions, last replaced the table %t; want 2, true", f.nft.runs()-runs, f.lastReplacedTable())
	}
	if n := f.metricValue("kubeproxy_sync_proxy_rules_nftables_sync_failures_total", dptest.IPv4Label); n != 0 {
		t.Errorf("sync failures = %v, want 0", n)
	}
	f.checkTableIsFullRender(testRenderConfig())
}
