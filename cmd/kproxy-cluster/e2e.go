package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kproxy/kproxy/test/cluster"
)

// proxyImages are the images of the e2e columns.
var proxyImages = map[string]string{
	"upstream": cluster.UpstreamProxyImage,
	"kproxy":   cluster.KproxyImage,
}

func cmdE2E(args []string) error {
	fs := flag.NewFlagSet("e2e", flag.ExitOnError)
	var c common
	c.register(fs)
	set := fs.String("set", "full", "spec set: short, full or slow")
	proxies := fs.String("proxies", "upstream,kproxy", "proxies to run, in order (upstream is the control)")
	modes := fs.String("modes", "nftables,iptables", "modes to run each proxy in")
	out := fs.String("out", "_output/cluster/e2e", "directory for the reports")
	table := fs.String("table", "", "write the Markdown table here too (the committed results)")
	procs := fs.Int("procs", 4, "ginkgo's parallel processes")
	_ = fs.Parse(args)
	outDir := defaultPath(*out)
	ctx, cancel := signalContext()
	defer cancel()
	return withCluster(ctx, c, func(ctx context.Context, cl *cluster.Cluster) error {
		e := &cluster.E2E{Cluster: cl, Procs: *procs}
		all, err := e.ListSpecs(ctx, dryRunDir(outDir))
		if err != nil {
			return err
		}
		specs, err := cluster.SelectSpecs(all, cluster.SpecSet(*set))
		if err != nil {
			return err
		}
		logf("e2e: %d specs in set %s (of %d in the binary)", len(specs), *set, len(all))
		var cols []cluster.Column
		dnsUp := false
		for _, mode := range strings.Split(*modes, ",") {
			for _, proxy := range strings.Split(*proxies, ",") {
				image, ok := proxyImages[proxy]
				if !ok {
					return fmt.Errorf("unknown proxy %q (upstream, kproxy)", proxy)
				}
				t := time.Now()
				if err := cl.UseProxy(ctx, image, cluster.ProxyConfig{Mode: mode}); err != nil {
					return fmt.Errorf("%s %s: %w", proxy, mode, err)
				}
				if !dnsUp {
					if err := cl.DeployDNS(ctx); err != nil {
						return err
					}
					dnsUp = true
				}
				logf("e2e: %s in %s mode runs as the DaemonSet (%s); running the specs", proxy, mode, image)
				results, err := e.Run(ctx, columnDir(outDir, *set, proxy, mode), specs)
				if err != nil {
					return fmt.Errorf("%s %s: %w", proxy, mode, err)
				}
				col := cluster.Column{Proxy: proxy, Mode: mode, Results: results}
				cols = append(cols, col)
				logf("e2e: %s: %s in %.0fs", col.Title(), summary(results), time.Since(t).Seconds())
				// The table after every column, so that an interrupted run keeps what it
				// measured.
				if err := writeTables(outDir, *set, *table, cols); err != nil {
					return err
				}
			}
		}
		for _, col := range cols {
			if n := passedCount(col.Results); n == 0 {
				return fmt.Errorf("%s passed no spec: the run itself is broken (see %s)", col.Title(), filepath.Join(outDir, *set))
			}
		}
		if err := regressionsError(cols); err != nil {
			return err
		}
		logf("e2e: kproxy passed every spec that upstream passed (table: %s)", filepath.Join(outDir, *set, "table.md"))
		return nil
	})
}

// cmdTable writes the table of an e2e run again from its reports: the dry run's
// listing picks the set's specs, and each proxy and mode with a report is a column, in
// the order e2e runs them.
func cmdTable(args []string) error {
	fs := flag.NewFlagSet("table", flag.ExitOnError)
	set := fs.String("set", "full", "spec set: short, full or slow")
	proxies := fs.String("proxies", "upstream,kproxy", "proxies, in order")
	modes := fs.String("modes", "nftables,iptables", "modes")
	out := fs.String("out", "_output/cluster/e2e", "the e2e run's report directory")
	table := fs.String("table", "", "write the Markdown table here too (the committed results)")
	_ = fs.Parse(args)
	outDir := defaultPath(*out)
	all, err := cluster.ReadSpecListing(dryRunDir(outDir))
	if err != nil {
		return fmt.Errorf("the e2e run's spec listing: %w", err)
	}
	specs, err := cluster.SelectSpecs(all, cluster.SpecSet(*set))
	if err != nil {
		return err
	}
	var cols []cluster.Column
	for _, mode := range strings.Split(*modes, ",") {
		for _, proxy := range strings.Split(*proxies, ",") {
			dir := columnDir(outDir, *set, proxy, mode)
			results, err := cluster.ReadRunResults(dir, specs)
			if errors.Is(err, os.ErrNotExist) {
				logf("table: no report in %s: no column %s %s", dir, proxy, mode)
				continue
			}
			if err != nil {
				return err
			}
			col := cluster.Column{Proxy: proxy, Mode: mode, Results: results}
			logf("table: %s: %s", col.Title(), summary(results))
			cols = append(cols, col)
		}
	}
	if len(cols) == 0 {
		return fmt.Errorf("no report under %s", filepath.Join(outDir, *set))
	}
	if err := writeTables(outDir, *set, *table, cols); err != nil {
		return err
	}
	return regressionsError(cols)
}

// dryRunDir and columnDir are where e2e keeps, under --out, the binary's spec listing
// and each column's reports; table reads them back from there.
func dryRunDir(outDir string) string { return filepath.Join(outDir, "dry-run") }

func columnDir(outDir, set, proxy, mode string) string {
	return filepath.Join(outDir, set, proxy+"-"+mode)
}

// regressionsError is the failure of a run in which kproxy failed specs that upstream
// passed in the same mode, nil when there are none.
func regressionsError(cols []cluster.Column) error {
	if reg := cluster.Regressions(cols); len(reg) > 0 {
		return errors.New("kproxy failed specs that upstream passed:\n  " + strings.Join(reg, "\n  "))
	}
	return nil
}

func passedCount(results []cluster.SpecResult) int {
	n := 0
	for _, r := range results {
		if r.State == "passed" {
			n++
		}
	}
	return n
}

func summary(results []cluster.SpecResult) string {
	counts := map[string]int{}
	for _, r := range results {
		counts[r.State]++
	}
	return fmt.Sprintf("%d passed, %d failed, %d skipped, %d other", counts["passed"], counts["failed"], counts["skipped"],
		len(results)-counts["passed"]-counts["failed"]-counts["skipped"])
}

func writeTables(outDir, set, table string, cols []cluster.Column) error {
	if err := writeTable(filepath.Join(outDir, set, "table.md"), set, cols); err != nil {
		return err
	}
	if table == "" {
		return nil
	}
	return writeTable(table, set, cols)
}

func writeTable(path, set string, cols []cluster.Column) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(f, "# Upstream's sig-network e2e specs (set %q) on the kproxy cluster\n\n", set)
	fmt.Fprintf(f, "Written by `kproxy-cluster e2e` on %s: upstream kube-proxy v1.37.2 and kproxy, each as kubeadm's DaemonSet from its image, on one cluster of 3 workers (test/cluster). A spec that fails with upstream too says something about the cluster, not the proxy.\n\n", time.Now().UTC().Format("2006-01-02"))
	if err := cluster.WriteTable(f, cols); err != nil {
		return err
	}
	return f.Close()
}
