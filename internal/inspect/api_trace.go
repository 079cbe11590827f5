package inspect

// Lookup is what a destination is: the ServicePorts an address and port reach
// (GET lookup?ip=A&port=P&protocol=tcp).
type Lookup struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	IP         string `json:"ip"`
	Port       int32  `json:"port"`
	Protocol   string `json:"protocol"`
	// ServiceCIDR is the ServiceCIDR holding IP, when one does (nftables mode: a
	// ClusterIP inside it that no Service holds is rejected).
	ServiceCIDR string        `json:"serviceCIDR,omitempty"`
	Matches     []LookupMatch `json:"matches"`
}

// LookupMatch is one ServicePort the destination is, explained.
type LookupMatch struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// As is how the destination reaches the port: ClusterIP, ExternalIP,
	// LoadBalancerIP or NodePort.
	As   string      `json:"as"`
	Port ServicePort `json:"port"`
}

// Trace is what `kube-proxy trace` found: a packet evaluated against the node's
// live ruleset, joined with the model's explanation of its destination.
type Trace struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	NodeName   string `json:"nodeName"`
	Mode       string `json:"mode"`
	// Ruleset names what was evaluated ("nft list table ip kube-proxy",
	// "iptables-save (nft)").
	Ruleset string      `json:"ruleset"`
	Packet  TracePacket `json:"packet"`
	// Verdict is ACCEPT, DROP or REJECT, or several joined by "," when the
	// packet's paths end differently.
	Verdict string `json:"verdict"`
	// Outcomes are the packet's distinct paths (one per endpoint a random choice
	// may pick), most likely first.
	Outcomes []TraceOutcome `json:"outcomes"`
	// Destination is the model's view of the packet's destination.
	Destination Lookup `json:"destination"`
}

// TracePacket is the packet traced.
type TracePacket struct {
	Family      string `json:"family"`
	Protocol    string `json:"protocol"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
	// InputInterface is the interface it arrives on; empty when it is
	// generated on the node itself (LocallyGenerated).
	InputInterface   string `json:"inputInterface,omitempty"`
	LocallyGenerated bool   `json:"locallyGenerated"`
	CTState          string `json:"ctState"`
}

// TraceOutcome is one path of the packet.
type TraceOutcome struct {
	Verdict string `json:"verdict"`
	// DNAT is the destination the packet is translated to ("" when none).
	DNAT string `json:"dnat,omitempty"`
	// Probability is this path's share of the packet's paths.
	Probability float64 `json:"probability"`
	Masquerade  bool    `json:"masquerade"`
	SNAT        string  `json:"snat,omitempty"`
	// Endpoint is the endpoint DNAT reaches among the destination's
	// ServicePorts, with why it is used (nil when DNAT is none of them).
	Endpoint *TraceEndpoint `json:"endpoint,omitempty"`
	// Path lists the base chains entered and the rules matched, in order.
	Path []string `json:"path"`
}

// TraceEndpoint is the endpoint a path reaches, as the model explains it.
type TraceEndpoint struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Port      string   `json:"port"`
	Endpoint  Endpoint `json:"endpoint"`
}
