package lab

import (
	"context"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/ipvs"
)

// emptyIPTables is iptables-restore input that, without --noflush, flushes every chain
// of the tables a proxy writes and deletes their user chains.
const emptyIPTables = "*nat\nCOMMIT\n*filter\nCOMMIT\n*mangle\nCOMMIT\n"

// ipvsDummyLink is the link the ipvs proxiers (upstream's and kproxy's) bind every
// Service address to.
const ipvsDummyLink = "kube-ipvs0"

// ResetNode1Dataplane deletes what a proxy of any mode may have left in node1 (the
// only namespace the proxies touch, where no other software writes rules): the
// kube-proxy nftables tables of both families, node1's iptables nat, filter and
// mangle tables of both families (restored empty, through the backend the proxies use
// in the lab, see IPTablesCommand), the ipvs mode's objects (every IPVS virtual
// server, every ipset, which only the proxies create there, and kube-ipvs0), and the
// conntrack table. It is best effort: what is already gone, or a kernel without IPVS
// (the host's), is not an error. The benchmarks and the differential suite run one
// proxy after another in node1 and call it in between.
func (l *Lab) ResetNode1Dataplane(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, fam := range []string{"ip", "ip6"} {
		_, _ = l.Node1.NS.Run(ctx, "nft", "delete", "table", fam, "kube-proxy")
	}
	for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		cmd := l.Node1.NS.Command(ctx, IPTablesCommand(fam, "-restore"), "-w", "5")
		cmd.Stdin = strings.NewReader(emptyIPTables)
		_ = cmd.Run()
	}
	l.resetNode1IPVS(ctx)
	_, _ = l.Node1.NS.Run(ctx, "conntrack", "-F")
}

// resetNode1IPVS removes the ipvs mode's objects from node1. The sets are destroyed
// after the iptables rules that match on them are gone (a set in use cannot be), and
// only where the kernel has IPVS: elsewhere no proxy could have created any.
func (l *Lab) resetNode1IPVS(ctx context.Context) {
	table := ipvs.New(l.Node1.NS.Path())
	defer func() { _ = table.Close() }()
	if table.Available() != nil {
		return
	}
	_ = table.Flush()
	_, _ = l.Node1.NS.IP(ctx, "link", "del", ipvsDummyLink)
	_, _ = l.Node1.NS.Run(ctx, "ipset", "destroy")
}
