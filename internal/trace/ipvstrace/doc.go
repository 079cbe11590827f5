// Package ipvstrace answers "where does this packet go?" (internal/trace) for the
// ipvs mode, kproxy's and upstream kube-proxy's: the iptables rules and the ipsets
// they match, walked by internal/trace/ipttrace (no second walker), with IPVS's
// ip_vs_in between the tables, for `kube-proxy trace` and the ipvs renderer's
// flow tests.
//
//	New(state, v6) (*ipttrace.Tracer, error)      the evaluator of one family's state
//	NewBalancer(services, templates, v6)         IPVS alone (an ipttrace.Balancer)
//
// State is what the path depends on: iptables-save, ipset save (read by
// internal/ipset.ParseSaveSets), the virtual servers with their real servers
// (internal/ipvs' types, as the kernel lists them), the persistence templates
// (session affinity's memory), IPVS's conntrack setting, the node's addresses with
// kube-ipvs0's, and the
// bridges br_netfilter shows to iptables. The package is pure: it never reads the
// kernel and does not log.
//
// IPVS, as the kernel's ip_vs_in does for the first packet of a connection (where
// it runs among the tables: ipttrace's documentation): the virtual server of the
// packet's protocol (TCP, UDP, SCTP; other protocols pass), destination address and
// port, or the address's port-0 catch-all; none: the packet goes on (to a local
// address, delivered to the node's sockets). Its real servers of weight > 0 are the
// choices (weight 0 is graceful termination's, never scheduled), one Outcome each:
// by weight for wrr, equal shares for rr (which ignores weights but 0) and, for the
// schedulers whose choice depends on state the trace does not see (lc, wlc, sh, mh,
// ...), equal shares, said in the trace. A persistent virtual server (session
// affinity) sends a client with a template to the template's real server while that
// one has weight > 0 (kube-proxy sets expire_quiescent_template); otherwise the
// client is scheduled anew. No real server of weight > 0: ip_vs_leave sends ICMP
// port unreachable, which the kernel rate-limits, and drops the packet: the verdict
// is Reject. Real servers are taken as masqueraded (NAT), the only forwarding kube-
// proxy uses. With IPVS's conntrack sysctl off (IPVS.NoConntrack; kube-proxy turns
// it on) the DNATed packet leaves conntrack, so nat does not masquerade it.
//
// Not modelled (errors, or left out where the kernel lists nothing): packets of an
// existing connection (IPVS's connection table; a packet not "new" or "untracked"
// that reaches a virtual server is an error), firewall-mark virtual servers
// (internal/ipvs does not list them), FTP's port-21 fallback, the sh, mh and
// lblc schedulers' hashes, and xt_ipvs's connection lookup (ipttrace).
package ipvstrace
