package cluster

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/kproxy/kproxy/test/cluster"
)

// TestUpstreamSpecs runs the focused set of upstream's sig-network specs against kproxy
// as the DaemonSet, in each mode: every spec must pass.
func TestUpstreamSpecs(t *testing.T) {
	c := clusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dir := t.TempDir()
	e := &cluster.E2E{Cluster: c}
	all, err := e.ListSpecs(ctx, filepath.Join(dir, "dry-run"))
	if err != nil {
		t.Fatal(err)
	}
	specs, err := cluster.SelectSpecs(all, cluster.SpecsShort)
	if err != nil {
		t.Fatal(err)
	}
	dnsUp := false
	for _, mode := range []string{"nftables", "iptables"} {
		t.Run(mode, func(t *testing.T) {
			if err := c.UseProxy(ctx, cluster.KproxyImage, cluster.ProxyConfig{Mode: mode}); err != nil {
				t.Fatal(err)
			}
			if !dnsUp {
				if err := c.DeployDNS(ctx); err != nil {
					t.Fatal(err)
				}
				dnsUp = true
			}
			start := time.Now()
			out := filepath.Join(c.WorkDir, "e2e-short-"+mode)
			results, err := e.Run(ctx, out, specs)
			if err != nil {
				t.Fatal(err)
			}
			passed := 0
			for _, r := range results {
				if r.State == "passed" {
					passed++
					continue
				}
				t.Errorf("%s: %s: %s", r.Name, r.State, r.Failure)
			}
			if len(results) != len(specs) {
				t.Errorf("%d results for %d specs (reports in %s)", len(results), len(specs), out)
			}
			t.Logf("kproxy %s: %d of %d specs passed in %s", mode, passed, len(specs), time.Since(start).Round(time.Second))
		})
	}
}
