package bench

import (
	"context"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/nftnetlink"
	"github.com/kproxy/kproxy/test/lab"
)

// ServiceIPsCount counts the elements of map service-ips in table ip kube-proxy, from
// inside ns, with one netlink dump counted without decoding the elements
// (nftnetlink.Executor.CountElements).
//
// Why not `nft list map` or google/nftables' GetSetElements: the first takes most of
// a second at 10,000 elements on a loaded machine; the second decodes every element,
// 220-270 ms at 30,000, the lag of the initial-sync figure behind the moment the
// proxy's transaction ended (the probes see it within 20 ms).
func ServiceIPsCount(ctx context.Context, ns *lab.NS) (int, error) {
	ex, err := nftnetlink.New(knftables.IPv4Family, "kube-proxy", nftnetlink.Options{NetNSPath: ns.Path()})
	if err != nil {
		return 0, err
	}
	return ex.CountElements(ctx, "service-ips")
}
