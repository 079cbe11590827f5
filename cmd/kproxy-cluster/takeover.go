package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kproxy/kproxy/test/cluster"
	"github.com/kproxy/kproxy/test/cluster/takeover"
)

// cmdTakeover: per mode, upstream kube-proxy runs as the DaemonSet; its image is
// changed to kproxy's (a rolling update) and back, under continuous probes.
func cmdTakeover(args []string) error {
	fs := flag.NewFlagSet("takeover", flag.ExitOnError)
	var c common
	c.register(fs)
	modes := fs.String("modes", "nftables,iptables", "modes to run the takeover in")
	table := fs.String("table", "", "write the Markdown results here too (the committed results)")
	settle := fs.Duration("settle", takeover.DefaultSettle, "probing after each rollout")
	_ = fs.Parse(args)
	ctx, cancel := signalContext()
	defer cancel()
	return withCluster(ctx, c, func(ctx context.Context, cl *cluster.Cluster) error {
		var report bytes.Buffer
		fmt.Fprintf(&report, "# Takeover: upstream kube-proxy's DaemonSet image swapped for kproxy's, and back\n\n")
		fmt.Fprintf(&report, "Written by `kproxy-cluster takeover` on %s (test/cluster, 3 workers). Probes: TCP and UDP to the ClusterIPs of a dual-stack Service from a pod on every node, and to its NodePorts on every worker address from outside the cluster; every probe a new connection, %d/s per target. Pass: no failed probe and no outage over %s.\n\n",
			time.Now().UTC().Format("2006-01-02"), takeover.DefaultRate, takeover.MaxOutage)
		var failures []string
		for _, mode := range strings.Split(*modes, ",") {
			res, err := runTakeover(ctx, cl, c.opts.BinDir, mode, *settle)
			fmt.Fprintf(&report, "## %s mode\n\n", mode)
			if werr := res.WriteMarkdown(&report, takeover.MaxOutage); werr != nil {
				return werr
			}
			report.WriteString("\n")
			if err != nil {
				return fmt.Errorf("takeover in %s mode: %w", mode, err)
			}
			for _, f := range res.Failures(takeover.MaxOutage) {
				failures = append(failures, mode+": "+f)
			}
		}
		os.Stdout.Write(report.Bytes())
		if *table != "" {
			if err := os.MkdirAll(filepath.Dir(*table), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(*table, report.Bytes(), 0o644); err != nil {
				return err
			}
		}
		if len(failures) > 0 {
			return errors.New("takeover failed:\n  " + strings.Join(failures, "\n  "))
		}
		logf("takeover: no failed probe, no outage over %s, in every mode", takeover.MaxOutage)
		return nil
	})
}

// runTakeover starts mode on upstream's image, then rolls kproxy's image out and
// upstream's back under the probes.
func runTakeover(ctx context.Context, cl *cluster.Cluster, binDir, mode string, settle time.Duration) (takeover.Result, error) {
	if err := cl.UseProxy(ctx, cluster.UpstreamProxyImage, cluster.ProxyConfig{Mode: mode}); err != nil {
		return takeover.Result{}, err
	}
	logf("takeover: upstream kube-proxy in %s mode runs as the DaemonSet; swapping to kproxy and back", mode)
	return takeover.Run(ctx, cl, takeover.Options{
		Images:    []string{cluster.KproxyImage, cluster.UpstreamProxyImage},
		ProberBin: filepath.Join(binDir, "kproxy-prober"),
		Label:     mode,
		Settle:    settle,
	})
}
