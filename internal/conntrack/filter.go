package conntrack

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// flowFilter matches exactly a given set of flows, by their full original and reply
// tuples, so that a flow re-created with another DNAT target between the list and
// the delete is left alone.
type flowFilter struct {
	keys map[string]struct{}
}

var _ netlink.CustomConntrackFilter = (*flowFilter)(nil)

func newFlowFilter(flows []*netlink.ConntrackFlow) *flowFilter {
	f := &flowFilter{keys: make(map[string]struct{}, len(flows))}
	for _, flow := range flows {
		f.keys[flowKey(flow)] = struct{}{}
	}
	return f
}

func flowKey(flow *netlink.ConntrackFlow) string {
	return fmt.Sprintf("%d#%s#%d#%s#%d#%s#%d#%s#%d",
		flow.Forward.Protocol,
		flow.Forward.SrcIP, flow.Forward.SrcPort,
		flow.Forward.DstIP, flow.Forward.DstPort,
		flow.Reverse.SrcIP, flow.Reverse.SrcPort,
		flow.Reverse.DstIP, flow.Reverse.DstPort)
}

// MatchConntrackFlow implements netlink.CustomConntrackFilter.
func (f *flowFilter) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	_, ok := f.keys[flowKey(flow)]
	return ok
}
