// Package trace holds what every packet tracer of kproxy shares: the described
// packet (Packet) and what became of it (Outcome, Result). The evaluators live in
// its subpackages, one per rule language: nfttrace for nftables rulesets, ipttrace
// for iptables rules as iptables-save lists them (with the ipsets they match), and
// ipvstrace for the ipvs mode's path (ipttrace's walk with IPVS's scheduling of
// virtual servers between the tables). They are pure: they evaluate
// rules they are given and never read the kernel themselves (internal/trace/live
// reads a node's ruleset for kube-proxy trace). Evaluator is the one interface
// kube-proxy trace needs of each. Packet.Header validates a packet once for both
// (families, protocol, ports, conntrack state, with the defaults), and the L4
// protocol vocabulary (ProtocolNumber, ProtocolName, HasPorts, IsCTState) is
// shared by both rule languages. Explore runs a tracer's walk once per combination
// of random choices (Choices), at most MaxOutcomes.
//
// Contract: a Result holds one Outcome per path the rules allow (a random choice
// between endpoints is explored exhaustively; each Outcome carries the probability
// of its path, so the Outcomes' probabilities add up to 1), and its Verdict is the
// verdict all paths share, or their sorted distinct verdicts joined by "," when
// they differ (which equals none of the constants, so callers notice).
package trace
