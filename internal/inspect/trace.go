package inspect

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/kproxy/kproxy/internal/trace"
)

// BuildTrace joins an evaluator's result for pkt with the model's view of its
// destination (dest, from BuildLookup): paths that end alike (same verdict, DNAT,
// SNAT and masquerade) are merged, their probabilities added (equal shares when
// the evaluator gave none), and each DNAT target is matched with the endpoint of
// the destination's ServicePorts that it is.
func BuildTrace(nodeName, mode, ruleset string, pkt TracePacket, res *trace.Result, dest *Lookup) *Trace {
	t := &Trace{
		APIVersion: APIVersion, Kind: "Trace", NodeName: nodeName, Mode: mode, Ruleset: ruleset,
		Packet: pkt, Verdict: string(res.Verdict), Outcomes: []TraceOutcome{}, Destination: *dest,
	}
	given := 0.0
	for _, o := range res.Outcomes {
		given += o.Probability
	}
	type key struct {
		verdict, dnat, snat string
		masq                bool
	}
	index := map[key]int{}
	for _, o := range res.Outcomes {
		p := o.Probability
		if given == 0 {
			p = 1 / float64(len(res.Outcomes))
		}
		k := key{string(o.Verdict), o.DNAT, o.SNAT, o.Masquerade}
		if i, ok := index[k]; ok {
			t.Outcomes[i].Probability += p
			continue
		}
		index[k] = len(t.Outcomes)
		path := o.Trace
		if path == nil {
			path = []string{}
		}
		t.Outcomes = append(t.Outcomes, TraceOutcome{
			Verdict: string(o.Verdict), DNAT: o.DNAT, SNAT: o.SNAT, Masquerade: o.Masquerade,
			Probability: p, Endpoint: endpointOf(dest, o.DNAT), Path: path,
		})
	}
	slices.SortStableFunc(t.Outcomes, func(a, b TraceOutcome) int {
		return cmp.Or(cmp.Compare(b.Probability, a.Probability), cmp.Compare(a.DNAT, b.DNAT))
	})
	return t
}

// endpointOf finds the endpoint dnat ("ip:port", "[ip6]:port") is among the
// destination's ServicePorts.
func endpointOf(dest *Lookup, dnat string) *TraceEndpoint {
	target, err := netip.ParseAddrPort(dnat)
	if err != nil {
		return nil
	}
	for _, m := range dest.Matches {
		for _, ep := range m.Port.Endpoints {
			if a, err := netip.ParseAddrPort(ep.Address); err == nil && a == target {
				return &TraceEndpoint{Namespace: m.Namespace, Name: m.Name, Port: m.Port.Name, Endpoint: ep}
			}
		}
	}
	return nil
}
