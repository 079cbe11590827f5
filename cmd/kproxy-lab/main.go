// Command kproxy-lab brings the local cluster lab up (for `make demo`), shows what it
// built — API server version, nodes, and a table of pod and external probes — and tears
// it down on exit, or on Ctrl-C with --hold.
//
// Usage:
//
//	kproxy-lab up [--hold] [--node1-pods N] [--node2-pods N] [--keep-workdir]
//	kproxy-lab demo [--hold] [--keep-workdir]
//
// demo also runs kproxy in node1 and shows a Service being load-balanced, a NodePort
// reached from the external client, and the rules kproxy wrote.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kproxy/kproxy/test/lab"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "up" && os.Args[1] != "demo") {
		fmt.Fprintln(os.Stderr, "usage: kproxy-lab up|demo [--hold] [--node1-pods N] [--node2-pods N] [--keep-workdir]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	hold := fs.Bool("hold", false, "keep the lab running until Ctrl-C")
	n1 := fs.Int("node1-pods", 3, "pods on node1")
	n2 := fs.Int("node2-pods", 2, "pods on node2")
	keep := fs.Bool("keep-workdir", false, "keep the work directory (logs, kubeconfig)")
	_ = fs.Parse(os.Args[2:])
	show := func(context.Context, *lab.Lab) error { return nil }
	if os.Args[1] == "demo" {
		show = demo
	}
	if err := up(lab.Options{Node1Pods: *n1, Node2Pods: *n2, KeepWorkDir: *keep}, *hold, show); err != nil {
		fmt.Fprintln(os.Stderr, "kproxy-lab:", err)
		os.Exit(1)
	}
}

// up brings the lab up, shows it, runs show (the demo), and tears down.
func up(opts lab.Options, hold bool, show func(context.Context, *lab.Lab) error) (err error) {
	if err := lab.Preflight(opts); err != nil {
		return err
	}
	// Tear down on Ctrl-C, kill or hang-up; a closed stdout (`| head`) must not kill us
	// before teardown either.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	l := lab.New(opts)
	defer func() {
		start := time.Now()
		if cerr := l.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("teardown: %w", cerr))
			return
		}
		fmt.Printf("torn down in %s\n", time.Since(start).Round(time.Millisecond))
	}()
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := l.Start(startCtx); err != nil {
		return err
	}
	t := l.Timings
	fmt.Printf("lab %s up in %s (network %s, etcd %s, apiserver ready %s)\n", l.ID, round(t.Total), round(t.Network), round(t.Etcd), round(t.APIServer))
	fmt.Printf("work dir %s, kubeconfig %s (use from inside %s)\n", l.WorkDir, l.KubeconfigPath, l.Node1.NS)

	ver, err := l.Client.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("server version: %w", err)
	}
	fmt.Printf("\nkube-apiserver %s at %s\n", ver.GitVersion, l.APIServerURL())
	nodes, err := l.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tZONE\tINTERNAL IPS\tPOD CIDRS")
	for _, n := range nodes.Items {
		var ips []string
		for _, a := range n.Status.Addresses {
			if a.Type == v1.NodeInternalIP {
				ips = append(ips, a.Address)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%v\n", n.Name, n.Labels[v1.LabelTopologyZone], ips, n.Spec.PodCIDRs)
	}
	_ = tw.Flush()

	// A host-network backend on node1, so the external client has something to reach.
	for _, proto := range []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP} {
		if _, err := l.Serve(ctx, l.Node1.NS, "node1-host", lab.BackendPort{Protocol: proto, Port: 80}); err != nil {
			return err
		}
	}
	fmt.Println()
	probeTable(ctx, l)
	if err := show(ctx, l); err != nil {
		return err
	}
	if hold {
		fmt.Println("\nholding; Ctrl-C to tear down")
		<-ctx.Done()
	}
	return nil
}

// probeTable probes, for each family and protocol, pod to pod across and within
// nodes, and from the external client to node1 and to a pod on each node.
func probeTable(ctx context.Context, l *lab.Lab) {
	type row struct {
		from  *lab.NS
		label string
		to    func(v1.IPFamily) netip.Addr
	}
	p1, p2 := l.Node1.Pods, l.Node2.Pods
	var rows []row
	if len(p1) > 1 {
		rows = append(rows, row{p1[0].NS, p1[0].Name + " -> " + p1[1].Name, p1[1].IPs.Get})
	}
	if len(p1) > 0 && len(p2) > 0 {
		rows = append(rows,
			row{p1[0].NS, p1[0].Name + " -> " + p2[0].Name, p2[0].IPs.Get},
			row{p2[0].NS, p2[0].Name + " -> " + p1[0].Name, p1[0].IPs.Get},
			row{l.Ext, "ext -> " + p1[0].Name, p1[0].IPs.Get},
			row{l.Ext, "ext -> " + p2[0].Name, p2[0].IPs.Get},
		)
	}
	rows = append(rows, row{l.Ext, "ext -> node1", l.Plan.Node1ExtIPs.Get})
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROBE\tFAMILY\tPROTO\tTARGET\tRESULT")
	for _, r := range rows {
		for _, fam := range lab.Families {
			for _, proto := range []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP} {
				target := netip.AddrPortFrom(r.to(fam), 80)
				res := r.from.Probe(ctx, proto, target)
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s (%s)\n", r.label, fam, proto, target, res, round(res.Elapsed))
			}
		}
	}
	_ = tw.Flush()
}

func round(d time.Duration) time.Duration {
	if d > time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(10 * time.Microsecond)
}
