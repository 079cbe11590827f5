package live

import (
	"context"
	"fmt"
	"net/netip"
	"sort"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/trace/ipttrace"
)

// loadIPTables evaluates the family's iptables-save with the kernel's "-m recent"
// lists (session affinity's memory) filled in, as nftables mode's affinity sets
// are part of its listing.
func loadIPTables(ctx context.Context, r Reader, family v1.IPFamily, local []netip.Addr) (*Loaded, error) {
	save, source, err := r.IPTablesSave(ctx, family)
	if err != nil {
		return nil, err
	}
	tr, err := ipttrace.New(save, family == v1.IPv6Protocol, local)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", source, err)
	}
	recent, err := r.IPTablesRecent(ctx, family)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(recent))
	for name := range recent {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		tr = tr.WithRecent(name, recent[name]...)
	}
	return &Loaded{Evaluator: tr, Ruleset: source}, nil
}
