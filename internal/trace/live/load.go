package live

import (
	"context"
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/nft/nfttext"
	"github.com/kproxy/kproxy/internal/trace"
	"github.com/kproxy/kproxy/internal/trace/nfttrace"
)

// TableName is the nftables table kproxy (and upstream's nftables mode) writes.
const TableName = "kube-proxy"

// Loaded is a live ruleset ready to trace packets of one family.
type Loaded struct {
	trace.Evaluator
	// Ruleset names what was read ("nft list table ip kube-proxy").
	Ruleset string
}

// Load reads the family's ruleset of mode ("nftables", "iptables" or "ipvs") through r
// and returns its evaluator, which knows the node's addresses.
func Load(ctx context.Context, r Reader, mode string, family v1.IPFamily) (*Loaded, error) {
	local, err := r.LocalAddresses(ctx, family)
	if err != nil {
		return nil, err
	}
	switch mode {
	case "nftables":
		return loadNFT(ctx, r, family, local)
	case "iptables":
		return loadIPTables(ctx, r, family, local)
	case "ipvs":
		return loadIPVS(ctx, r, family, local)
	}
	return nil, fmt.Errorf("the proxy runs in mode %q, which kube-proxy trace does not evaluate", mode)
}

func loadNFT(ctx context.Context, r Reader, family v1.IPFamily, local []netip.Addr) (*Loaded, error) {
	fam := "ip"
	if family == v1.IPv6Protocol {
		fam = "ip6"
	}
	text, err := r.NFTables(ctx, fam, TableName)
	if err != nil {
		return nil, err
	}
	listing, err := nfttext.ParseListing(text)
	if err != nil {
		return nil, fmt.Errorf("reading nft list table %s %s: %w", fam, TableName, err)
	}
	fake, err := nfttrace.FromListing(listing)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, len(local))
	for i, a := range local {
		addrs[i] = a.String()
	}
	tr, err := nfttrace.New(fake, addrs)
	if err != nil {
		return nil, err
	}
	return &Loaded{Evaluator: tr, Ruleset: "nft list table " + fam + " " + TableName}, nil
}
