package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
)

// demo runs kproxy in node1 and shows what it does: a dual-stack NodePort Service
// backed by pods on both nodes is load-balanced from a pod, reached from the external
// client through node1's address, and the rules kproxy wrote are printed.
func demo(ctx context.Context, l *lab.Lab) error {
	if os.Getenv("KPROXY_PROXY_BIN") == "" {
		if bin := filepath.Join(l.BinDir, "kube-proxy"); fileExists(bin) {
			os.Setenv("KPROXY_PROXY_BIN", bin)
		}
	}
	fmt.Println("\n== kproxy: starting kube-proxy (nftables mode) in", l.Node1.NS)
	p, err := proxytest.Start(l, proxytest.Options{})
	if err != nil {
		return err
	}
	start := time.Now()
	if err := p.WaitHealthy(ctx, time.Minute); err != nil {
		return err
	}
	fmt.Printf("healthy in %s (GET /healthz on 10256)\n", round(time.Since(start)))

	svc, err := l.CreateWebService(ctx, "web", v1.ServiceTypeNodePort)
	if err != nil {
		return err
	}
	nodePort := svc.Spec.Ports[0].NodePort
	fmt.Printf("\ncreated Service default/web: type NodePort, ClusterIPs %v, port 80 -> 8080, NodePort %d, endpoints: %d pods on 2 nodes\n",
		svc.Spec.ClusterIPs, nodePort, len(l.Pods))

	client := l.Node1.Pods[0]
	for _, s := range svc.Spec.ClusterIPs {
		target := netip.AddrPortFrom(netip.MustParseAddr(s), 80)
		err := p.WaitFor(ctx, "ClusterIP "+target.String(), 20*time.Second, func(ctx context.Context) error {
			if res := client.NS.Probe(ctx, v1.ProtocolTCP, target); res.Outcome != lab.Answered {
				return fmt.Errorf("%s", res)
			}
			return nil
		})
		if err != nil {
			return err
		}
		counts := map[string]int{}
		const n = 30
		for range n {
			res := client.NS.Probe(ctx, v1.ProtocolTCP, target)
			key := res.String()
			if res.Outcome == lab.Answered {
				key = "pod=" + res.Reply.Pod
			}
			counts[key]++
		}
		fmt.Printf("\n%d TCP connections from %s to ClusterIP %s were answered by:\n", n, client.Name, target)
		printCounts(counts)
	}

	fmt.Printf("\nNodePort %d from the external client (%s) to node1's InternalIPs:\n", nodePort, l.Ext)
	for _, fam := range lab.Families {
		target := netip.AddrPortFrom(l.Node1.IPs.Get(fam), uint16(nodePort))
		for range 3 {
			res := l.Ext.Probe(ctx, v1.ProtocolTCP, target)
			fmt.Printf("  %-28s %s\n", target, res)
		}
	}
	fmt.Println("  (client is node1's address: kproxy masquerades external NodePort traffic, as upstream)")

	_, body, err := p.Get(ctx, proxytest.MetricsURL)
	if err == nil {
		fmt.Println("\nsync metrics (GET /metrics on 127.0.0.1:10249):")
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "kubeproxy_sync_proxy_rules_duration_seconds_sum") ||
				strings.HasPrefix(line, "kubeproxy_sync_proxy_rules_duration_seconds_count") ||
				strings.HasPrefix(line, "kubeproxy_network_programming_duration_seconds_count") {
				fmt.Println("  " + line)
			}
		}
	}

	bin, err := proxytest.Binary()
	if err != nil {
		return err
	}
	out, err := l.Node1.NS.Run(ctx, bin, "explain", "service", "default/web")
	if err != nil {
		return fmt.Errorf("kube-proxy explain: %w", err)
	}
	fmt.Println("\nwhat node1 does with it, and why (kube-proxy explain service default/web, in node1):")
	printIndented(out)
	if out, err = l.Node1.NS.Run(ctx, bin, "explain", "node", "--syncs", "3"); err != nil {
		return fmt.Errorf("kube-proxy explain node: %w", err)
	}
	fmt.Println("\nthe node's side (kube-proxy explain node --syncs 3, in node1):")
	printIndented(out)

	if err := showDrift(ctx, l, bin); err != nil {
		return err
	}

	out, err = l.Node1.NS.Run(ctx, "nft", "list", "table", "ip", "kube-proxy")
	if err != nil {
		return fmt.Errorf("nft list table: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	fmt.Printf("\nthe rules kproxy wrote (nft list table ip kube-proxy in node1, %d lines; IPv6 is in table ip6 kube-proxy):\n", len(lines))
	for _, line := range lines {
		fmt.Println("  " + line)
	}
	return nil
}

// showDrift changes kproxy's rules as a third party would, shows what
// `kube-proxy verify` says, then deletes the table and shows how soon kproxy
// rewrote it.
func showDrift(ctx context.Context, l *lab.Lab, bin string) error {
	if _, err := l.Node1.NS.Run(ctx, "nft", "flush", "map", "ip", "kube-proxy", "service-ips"); err != nil {
		return fmt.Errorf("nft flush map: %w", err)
	}
	// verify exits 2 when it finds differences: its output is what matters here.
	out, _ := l.Node1.NS.Run(ctx, bin, "verify")
	fmt.Println("\na third party flushes a map (nft flush map ip kube-proxy service-ips); kube-proxy verify, in node1:")
	printIndented(out)

	start := time.Now()
	if _, err := l.Node1.NS.Run(ctx, "nft", "delete", "table", "ip", "kube-proxy"); err != nil {
		return fmt.Errorf("nft delete table: %w", err)
	}
	deadline := start.Add(10 * time.Second)
	for {
		out, err := l.Node1.NS.Run(ctx, bin, "verify")
		if err == nil {
			fmt.Printf("\nthen it deletes the table (nft delete table ip kube-proxy); kproxy rewrote it, and kube-proxy verify was clean %s later:\n", time.Since(start).Round(time.Millisecond))
			printIndented(out)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the deleted table was not rewritten within 10 s: %w: %s", err, out)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// printIndented prints a command's output indented by two spaces.
func printIndented(out string) {
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		fmt.Println("  " + line)
	}
}

func printCounts(counts map[string]int) {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("  %-24s %s %d\n", k, strings.Repeat("#", counts[k]), counts[k])
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
