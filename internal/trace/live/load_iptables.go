package live

import (
	"context"
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
)

// loadIPTables is where the iptables evaluator (internal/trace/ipttrace) plugs in.
func loadIPTables(_ context.Context, _ Reader, family v1.IPFamily, _ []netip.Addr) (*Loaded, error) {
	return nil, fmt.Errorf("tracing the %s iptables rules is not supported yet (the iptables evaluator is not in this build)", family)
}
