// Command kproxy-cluster runs the real cluster of test/cluster (root):
//
//	kproxy-cluster up [--proxy-image REF] [--mode nftables|iptables] [--workers N] [--keep-workdir]
//	kproxy-cluster e2e [--out DIR] [--set short|full|slow] ...
//	kproxy-cluster table [--out DIR] [--set short|full|slow] [--table FILE]
//	kproxy-cluster takeover [--modes nftables,iptables] ...
//
// up brings the cluster up with kube-proxy as kubeadm's DaemonSet from an image
// (kproxy's by default), then CoreDNS, prints how to reach it, and holds until Ctrl-C
// (or SIGTERM), then tears everything down. e2e runs upstream's sig-network e2e specs
// against upstream kube-proxy and kproxy in each mode on one cluster and writes the
// table (make e2e-upstream); table writes that table again from the reports an e2e run
// left in --out (no cluster: an interrupted run's columns, or a new table format).
// takeover swaps upstream's DaemonSet image for kproxy's and
// back under continuous probes.
//
// The binaries come from --bin-dir (hack/build-tools.sh), the images from --image-dir
// (hack/cluster-images.sh), the addon manifests from --deploy-dir (deploy/).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kproxy/kproxy/test/cluster"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kproxy-cluster up|e2e|table|takeover [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = cmdUp(os.Args[2:])
	case "e2e":
		err = cmdE2E(os.Args[2:])
	case "table":
		err = cmdTable(os.Args[2:])
	case "takeover":
		err = cmdTakeover(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kproxy-cluster:", err)
		os.Exit(1)
	}
}

// common are the flags of every subcommand.
type common struct {
	opts        cluster.Options
	keepWorkDir bool
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.opts.BinDir, "bin-dir", "_output/bin", "the cluster's binaries (hack/build-tools.sh)")
	fs.StringVar(&c.opts.ImageDir, "image-dir", "_output/cluster/images", "the images (hack/cluster-images.sh)")
	fs.StringVar(&c.opts.DeployDir, "deploy-dir", "deploy", "the kube-proxy addon manifests")
	fs.IntVar(&c.opts.Workers, "workers", 3, "worker nodes")
	fs.BoolVar(&c.keepWorkDir, "keep-workdir", false, "keep the work directory (logs, configuration) after teardown")
}

// signalContext is cancelled on SIGINT, SIGTERM or SIGHUP; a closed stdout must not
// kill the process before teardown.
func signalContext() (context.Context, context.CancelFunc) {
	signal.Ignore(syscall.SIGPIPE)
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// withCluster starts a cluster, runs fn, and tears the cluster down whatever happens.
func withCluster(ctx context.Context, c common, fn func(context.Context, *cluster.Cluster) error) (err error) {
	c.opts.Log = logf
	cl := cluster.New(c.opts)
	defer func() {
		t := time.Now()
		if c.keepWorkDir {
			cl.KeepWorkDir()
		}
		cerr := cl.Close()
		if cerr == nil {
			cerr = cl.Leftovers(context.Background())
		}
		logf("cluster: torn down in %.1fs", time.Since(t).Seconds())
		if c.keepWorkDir && cl.WorkDir != "" {
			logf("cluster: work directory kept: %s", cl.WorkDir)
		}
		err = errors.Join(err, cerr)
	}()
	if err := cl.Start(ctx); err != nil {
		return err
	}
	return fn(ctx, cl)
}

func cmdUp(args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	var c common
	c.register(fs)
	image := fs.String("proxy-image", cluster.KproxyImage, "kube-proxy image of the DaemonSet")
	mode := fs.String("mode", "nftables", "kube-proxy mode (config.conf's mode; \"\" is iptables, as upstream)")
	_ = fs.Parse(args)
	ctx, cancel := signalContext()
	defer cancel()
	return withCluster(ctx, c, func(ctx context.Context, cl *cluster.Cluster) error {
		if err := cl.DeployProxy(ctx, *image, cluster.ProxyConfig{Mode: *mode}); err != nil {
			return err
		}
		logf("cluster: kube-proxy DaemonSet (%s, mode %q) Ready on every node", *image, *mode)
		if err := cl.DeployDNS(ctx); err != nil {
			return err
		}
		logf("cluster: CoreDNS available")
		wrapper, err := cl.WriteKubectlWrapper()
		if err != nil {
			return err
		}
		fmt.Printf("The cluster is up (%d workers). From another terminal:\n  %s get nodes,pods -A -o wide\n", len(cl.Workers), wrapper)
		fmt.Printf("(kubectl runs in the client namespace %s; the API server is %s)\nCtrl-C tears it down.\n", cl.ClientNS().Name, cl.APIServerURL())
		<-ctx.Done()
		return nil
	})
}

func defaultPath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return abs
}
