package live

import (
	"context"
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/trace/ipvstrace"
)

// loadIPVS evaluates the ipvs mode's packet path: the family's iptables rules,
// the ipsets they match, IPVS's virtual servers with their real servers and
// persistence templates, over the node's addresses (kube-ipvs0's among them).
func loadIPVS(ctx context.Context, r Reader, family v1.IPFamily, local []netip.Addr) (*Loaded, error) {
	save, source, err := r.IPTablesSave(ctx, family)
	if err != nil {
		return nil, err
	}
	st := &ipvstrace.State{Save: save, Local: local}
	if st.Sets, err = r.IPSets(ctx); err != nil {
		return nil, err
	}
	if st.IPVS, err = r.IPVS(ctx, family); err != nil {
		return nil, err
	}
	if st.Bridged, err = r.Bridged(ctx, family); err != nil {
		return nil, err
	}
	tr, err := ipvstrace.New(st, family == v1.IPv6Protocol)
	if err != nil {
		return nil, fmt.Errorf("reading %s, ipset save and the IPVS table: %w", source, err)
	}
	return &Loaded{Evaluator: tr, Ruleset: source + ", ipset save, IPVS virtual servers (netlink) and templates (" + ipvsConnFile + ")"}, nil
}
