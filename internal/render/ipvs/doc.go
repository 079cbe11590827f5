// Package ipvs is kproxy's pure renderer of the ipvs mode for one IP family: from
// the configuration and the model's ServicePortViews to the kernel state upstream
// kube-proxy v1.37.2's ipvs proxier (pkg/proxy/ipvs) programs: the addresses bound
// to kube-ipvs0, the IPVS virtual servers with their real servers, upstream's
// ipsets with their entries, and the iptables rules around them. It does no I/O,
// does not log and keeps no global mutable state: the proxier
// (internal/dataplane/ipvs) diffs its output against the kernel and applies it.
//
// # API
//
//	cfg.Validate() error
//	Render(cfg, views) *Desired                 the whole desired state
//	RenderService(cfg, view) *Fragment          what one ServicePort contributes
//	RenderServices(cfg, views) []*Fragment
//	Assemble(cfg, fragments) *Desired           merge fragments (Render = Assemble(RenderServices))
//	JumpRules() []iptables.Jump                 jumps from the built-in chains (ensure, prepend)
//	Sets(family) []ipset.Set, SetName(id, family), Chains(table)   names, for creation and --cleanup
//	desired.WriteRules(buf) iptables.Written    iptables-restore --noflush input of Desired.Rules
//	desired.Dump() string                       ipvsadm / ipset save / iptables-save text
//	fragment.Describe(family) []string          one ServicePort's kernel objects, for explain
//
// Typical sync: render the fragments of the ServicePorts that changed, keep the
// others, Assemble, then make the kernel match: bind Desired.Addresses on
// kube-ipvs0 (and unbind the others), create every set of Desired.Sets and make
// its entries exactly these, add, update or delete virtual servers and real
// servers (graceful termination is the proxier's), ensure the chains (Chains) and
// then JumpRules, which need their targets, and restore Desired.Rules with
// iptables-restore --noflush (WriteRules: every chain is declared, so flushed,
// and rewritten whole, as upstream does at every sync). Desired.Rules change only
// with the configuration, when a set becomes empty or non-empty, or when the LB
// VIPs the node may not reach change: while they are Equal to the last ones
// applied and the kernel still holds those, the restore can be skipped.
//
// # Behaviour
//
// Upstream's, including where it differs from the other modes (each is a comment
// where it is rendered):
//
//   - Every ServicePort gets its virtual servers whether or not it has endpoints:
//     without a real server IPVS answers ICMP port unreachable itself; no rule
//     rejects or drops per Service (KUBE-IPVS-FILTER only rejects new connections
//     to Service addresses on ports no virtual server serves).
//   - Real servers: Local-policy endpoints for a virtual server under a Local
//     policy (ClusterIP with internalTrafficPolicy Local; externalIPs, LB VIPs and
//     NodePorts with externalTrafficPolicy Local) when this node has some, else the
//     Cluster-policy endpoints, even under a Local policy (kubernetes#97081). The
//     endpoint lists are the model's (topology, terminating fallback), weight 1.
//   - Session affinity ClientIP is IPVS persistence with the affinity's timeout; the
//     mh scheduler gets upstream's source-port hashing flag (FlagMHPort).
//   - NodePorts get one virtual server per node address (NodePortAddresses' IPs,
//     or every HostAddress with "all"), loopback never; no node address means no
//     NodePort at all (nor health check node port entry, as upstream).
//   - externalIPs and LB VIPs already local on another interface are not bound
//     to kube-ipvs0; ClusterIPs always are.
//   - IPv6 sets are upstream's "KUBE-6-" names cut to 31 characters.
//   - Entries are in `ipset save` notation; a /32 (/128) source range is written
//     without its length, as ipset prints it.
//
// Known difference: KUBE-LOOP-BACK holds the local endpoints some traffic may be
// sent to (the view's AllReachableEndpoints); upstream adds every local endpoint,
// also those not ready. No traffic reaches those through IPVS, so no packet is
// treated differently.
package ipvs
