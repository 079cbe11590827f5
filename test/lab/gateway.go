package lab

import (
	"context"
	"fmt"
	"time"
)

// AddGatewayRoutes gives node1 routes for the service and load-balancer ranges via
// node2, standing in for the default gateway every real node has. Without them node1
// has no route to an address no rule translates (a Service without endpoints, an
// unallocated ClusterIP, a dropped load-balancer IP), nor, for its own connections, to
// any ClusterIP: the kernel answers "network unreachable" at the route lookup, before
// the hooks where the proxy's rules live, and what the proxy does could not be
// observed. The routes live in node1's namespace, which the lab deletes at teardown.
func (l *Lab) AddGatewayRoutes(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var cmds []string
	for _, fam := range Families {
		gw := l.Node2.IPs.Get(fam)
		cmds = append(cmds,
			"route replace "+ServiceCIDRs.Get(fam).String()+" via "+gw.String(),
			"route replace "+LoadBalancerCIDRs.Get(fam).String()+" via "+gw.String(),
		)
	}
	if err := l.Node1.NS.IPBatch(ctx, cmds); err != nil {
		return fmt.Errorf("gateway routes in node1: %w", err)
	}
	return nil
}
