package nftables

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
)

// What each mode leaves in node1's kernel, and what other software keeps there. The
// checks read the kernel from inside node1 only.

// iptablesCmd is the iptables tool of fam that the proxy uses in the lab.
func iptablesCmd(fam v1.IPFamily, tool string) string { return lab.IPTablesCommand(fam, tool) }

// iptablesSave returns node1's iptables-save output of fam (every table).
func iptablesSave(ctx context.Context, l *lab.Lab, fam v1.IPFamily) (string, error) {
	out, err := l.Node1.NS.Run(ctx, iptablesCmd(fam, "-save"))
	if err != nil {
		return "", fmt.Errorf("%s in node1: %w: %s", iptablesCmd(fam, "-save"), err, out)
	}
	return out, nil
}

// kubeletChains are the kubelet's chains, which kube-proxy's cleanup leaves alone.
var kubeletChains = []string{"KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"}

// proxyChains lists the kube-proxy chains ("table/KUBE-...") declared in an
// iptables-save dump: every KUBE- chain except the kubelet's.
func proxyChains(dump string) []string {
	var out []string
	table := ""
	for _, line := range strings.Split(dump, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":KUBE-"):
			chain := strings.Fields(line[1:])[0]
			if !slices.Contains(kubeletChains, chain) {
				out = append(out, table+"/"+chain)
			}
		}
	}
	return out
}

// nftProxyTables lists the proxy's nftables tables present in node1.
func nftProxyTables(ctx context.Context, l *lab.Lab) ([]string, error) {
	out, err := l.Node1.NS.Run(ctx, "nft", "list", "tables")
	if err != nil {
		return nil, fmt.Errorf("nft list tables in node1: %w: %s", err, out)
	}
	var tables []string
	for _, t := range []string{"table ip kube-proxy", "table ip6 kube-proxy"} {
		if strings.Contains(out, t) {
			tables = append(tables, t)
		}
	}
	return tables, nil
}

// ipvsState is what node1 holds of the ipvs mode: whether kube-ipvs0 exists and
// how many IPVS virtual servers there are (none where the kernel has no IP_VS).
func ipvsState(ctx context.Context, l *lab.Lab) (link bool, services int, err error) {
	out, err := l.Node1.NS.Run(ctx, "ip", "-o", "link", "show")
	if err != nil {
		return false, 0, fmt.Errorf("ip link show in node1: %w: %s", err, out)
	}
	link = strings.Contains(out, " kube-ipvs0:")
	// /proc/net/ip_vs is the reading process's namespace's: one line per virtual
	// server ("TCP  0A600001:0050 rr"), one per real server ("  -> ...").
	table, err := l.Node1.NS.Run(ctx, "cat", "/proc/net/ip_vs")
	if err != nil {
		return link, 0, nil
	}
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && (f[0] == "TCP" || f[0] == "UDP" || f[0] == "SCTP") {
			services++
		}
	}
	return link, services, nil
}

// modeState checks that node1 holds exactly the state of mode: its rules in both
// families, and none of the other modes'.
func modeState(ctx context.Context, l *lab.Lab, mode string) error {
	tables, err := nftProxyTables(ctx, l)
	if err != nil {
		return err
	}
	link, services, err := ipvsState(ctx, l)
	if err != nil {
		return err
	}
	switch {
	case mode == modeIPVS && (!link || services == 0):
		return fmt.Errorf("the ipvs mode's state is missing: kube-ipvs0 present %t, %d virtual servers", link, services)
	case mode != modeIPVS && (link || services > 0):
		return fmt.Errorf("the ipvs mode's state left in %s mode: kube-ipvs0 present %t, %d virtual servers", mode, link, services)
	}
	for _, fam := range lab.Families {
		dump, err := iptablesSave(ctx, l, fam)
		if err != nil {
			return err
		}
		chains := proxyChains(dump)
		switch {
		case (mode == modeIPTables || mode == modeIPVS) && !slices.Contains(chains, "nat/KUBE-SERVICES"):
			return fmt.Errorf("%s: no nat KUBE-SERVICES chain (%s mode's rules missing): %v", fam, mode, chains)
		case mode == modeIPTables && slices.Contains(chains, "filter/KUBE-IPVS-FILTER"):
			return fmt.Errorf("%s: the ipvs mode's chains left in iptables mode: %v", fam, chains)
		case mode == modeNFTables && len(chains) > 0:
			return fmt.Errorf("%s: iptables-mode chains left in nftables mode: %v", fam, chains)
		}
	}
	switch {
	case mode != modeNFTables && len(tables) > 0:
		return fmt.Errorf("nftables-mode tables left in %s mode: %v", mode, tables)
	case mode == modeNFTables && len(tables) != 2:
		return fmt.Errorf("nftables mode's tables missing: have %v", tables)
	}
	return nil
}

// noProxyState checks that node1 holds nothing of either mode (after --cleanup).
func noProxyState(ctx context.Context, l *lab.Lab) error {
	tables, err := nftProxyTables(ctx, l)
	if err != nil {
		return err
	}
	if len(tables) > 0 {
		return fmt.Errorf("nftables tables left: %v", tables)
	}
	for _, fam := range lab.Families {
		dump, err := iptablesSave(ctx, l, fam)
		if err != nil {
			return err
		}
		if chains := proxyChains(dump); len(chains) > 0 {
			return fmt.Errorf("%s: iptables chains left: %v\n%s", fam, chains, dump)
		}
		for _, line := range strings.Split(dump, "\n") {
			if strings.HasPrefix(line, "-A ") && strings.Contains(line, "-j KUBE-") && !strings.Contains(line, "-j KUBE-FIREWALL") {
				return fmt.Errorf("%s: jump left: %s", fam, line)
			}
		}
	}
	return nil
}

// otherTable is a table of another program in node1 the proxy must never touch.
const otherTable = "other"

// otherChains are another program's iptables rules in node1 (both families), in
// tables the iptables mode shares, as iptables-save prints them.
var otherChains = []struct{ table, chain, hook, rule string }{
	{"filter", "OTHER-FW", "INPUT", "-p tcp -m tcp --dport 9 -j ACCEPT"},
	{"nat", "OTHER-NAT", "PREROUTING", "-p tcp -m tcp --dport 8022 -j REDIRECT --to-ports 22"},
}

// addOtherSoftware creates, in node1, `table inet other` with a counted rule and
// another program's iptables chains with their jumps (both families), and deletes
// them at the end of t.
func addOtherSoftware(ctx context.Context, t *testing.T, l *lab.Lab) {
	t.Helper()
	ns := l.Node1.NS
	for _, args := range [][]string{
		{"add", "table", "inet", otherTable},
		{"add", "chain", "inet", otherTable, "c", "{ type filter hook input priority 10 ; }"},
		{"add", "rule", "inet", otherTable, "c", "tcp", "dport", "9", "counter", "accept"},
	} {
		if out, err := ns.Run(ctx, "nft", args...); err != nil {
			t.Fatalf("nft %v in node1: %v %s", args, err, out)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = ns.Run(ctx, "nft", "delete", "table", "inet", otherTable)
	})
	for _, fam := range lab.Families {
		ipt := iptablesCmd(fam, "")
		for _, c := range otherChains {
			for _, args := range [][]string{
				{"-w", "5", "-t", c.table, "-N", c.chain},
				append([]string{"-w", "5", "-t", c.table, "-A", c.chain}, strings.Fields(c.rule)...),
				{"-w", "5", "-t", c.table, "-A", c.hook, "-j", c.chain},
			} {
				if out, err := ns.Run(ctx, ipt, args...); err != nil {
					t.Fatalf("%s %v in node1: %v %s", ipt, args, err, out)
				}
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, _ = ns.Run(ctx, ipt, "-w", "5", "-t", c.table, "-D", c.hook, "-j", c.chain)
				_, _ = ns.Run(ctx, ipt, "-w", "5", "-t", c.table, "-F", c.chain)
				_, _ = ns.Run(ctx, ipt, "-w", "5", "-t", c.table, "-X", c.chain)
			})
		}
	}
}

// checkOtherSoftware fails t unless node1 still has the other program's table and
// chains, with their rules and jumps.
func checkOtherSoftware(ctx context.Context, t *testing.T, l *lab.Lab, when string) {
	t.Helper()
	out, err := l.Node1.NS.Run(ctx, "nft", "list", "table", "inet", otherTable)
	if err != nil || !strings.Contains(out, "tcp dport 9 counter") {
		t.Errorf("%s: table inet %s or its rule is gone: %v\n%s", when, otherTable, err, out)
	}
	for _, fam := range lab.Families {
		dump, err := iptablesSave(ctx, l, fam)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, c := range otherChains {
			for _, want := range []string{"-A " + c.chain + " " + c.rule, "-A " + c.hook + " -j " + c.chain} {
				if !strings.Contains(dump, want+"\n") {
					t.Errorf("%s: %s: another program's rule %q (table %s) is gone:\n%s", when, fam, want, c.table, dump)
				}
			}
		}
	}
}

// waitModeState waits until node1 holds exactly the state of mode (the proxy's
// start-up removes the other mode's rules while it syncs its own).
func waitModeState(ctx context.Context, t *testing.T, p *proxytest.Proxy, mode string) {
	t.Helper()
	err := p.WaitFor(ctx, "node1 holding the "+mode+" mode's rules only", syncTimeout, func(ctx context.Context) error {
		return modeState(ctx, p.Lab, mode)
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, dumpRules(p))
	}
}
