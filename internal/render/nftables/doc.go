// Package nftables is kproxy's pure nftables renderer: it turns the model (one
// model.ServicePortView per ServicePort) into a description of the `kube-proxy` table
// of one family (ip or ip6), and turns (last applied, desired) into a minimal
// transaction, a sequence of typed operations (internal/nft's Op). It does no I/O
// and keeps no global state: the dataplane runs the transactions it returns.
//
// # API
//
//	cfg.Validate() error
//	RenderBase(cfg) Fragment                  table-wide chains, sets and maps
//	RenderService(cfg, view) Fragment         one ServicePort's chains and elements
//	RenderServices(cfg, views) map[name]*Fragment
//	NewState(base, services) *State           what a full sync programs
//	RefreshOps(state, existing)               full sync keeping the table (and affinity)
//	FullOps(state)                            full sync replacing the table
//	state.Plan(base, updates, opts) *Plan     delta for changed fragments only (Plan.Ops)
//	state.Commit(plan)                        after the transaction succeeded
//	state.DeleteStaleChains(chains) []nft.Op  with PlanOptions.DeferChainDeletes
//	AddOps(tx, ops)                           operations into a knftables transaction
//	WriteRefresh / WriteFull(tx, ...)         AddOps of RefreshOps / FullOps
//	RefreshScript / FullScript                the same, as nft text in pieces (printed ops)
//
// Typical sync loop (run: a writer of operations, nftnetlink.Executor.RunOps, or
// AddOps into a knftables transaction of the table TableName in cfg.Family):
//
//	first sync, or after a failed transaction:
//	    st := NewState(&base, RenderServices(cfg, views))
//	    run(RefreshOps(st, listed)); or, if refused, run(FullOps(st))
//	    applied = st
//	otherwise, with the ServicePorts that changed (nil fragment = deleted):
//	    plan := applied.Plan(nil /* or &newBase */, updates, opts); run(plan.Ops); applied.Commit(plan)
//
// A Fragment is a plain, sorted, immutable description (chains with typed rules,
// sets and maps, elements of named sets and maps). Rules are internal/nft values
// (Rule is nft.Rule), and so are set types (nft.SetType, one shared value per
// type, settypes.go) and element keys and values (nft.Elem, packed: the applied
// State holds ~120,000 elements at 10,000 Services): the renderer builds
// statements and elements, never text, and turns
// fragments into operations in one place (ops.go); AddOps and FullScript print
// them with internal/nft's printer, so the text is written in one place and a
// netlink writer encodes the same values directly.
// Rendering the same input twice gives equal Fragments, so callers may re-render
// everything and still program nothing when nothing changed; Plan costs O(size of
// the changed fragments).
//
// # Behaviour
//
// The ruleset replicates upstream kube-proxy v1.37's nftables mode (see its
// README.md) and uses the same table name and the same names for the table-wide
// objects, so the first full sync ("add table; delete table; add table; ...", one
// atomic transaction) replaces upstream's ruleset in place.
//
// # Layout
//
// Base chains (type, hook, priority), as upstream:
//
//	filter-prerouting-pre-dnat  filter prerouting dstnat-10  -> firewall-check (ct state new)
//	filter-output-pre-dnat      filter output     dstnat-10  -> firewall-check (ct state new)
//	filter-input                filter input      filter     -> nodeport-endpoints-check, service-endpoints-check
//	filter-forward              filter forward    filter     -> service-endpoints-check, cluster-ips-check
//	filter-output               filter output     filter     -> service-endpoints-check, cluster-ips-check
//	nat-prerouting              nat    prerouting dstnat     -> services
//	nat-output                  nat    output     dstnat     -> services
//	nat-postrouting             nat    postrouting srcnat    -> masquerading
//
// Dispatch is done by verdict maps, one lookup per packet whatever the number of
// Services: service-ips (ip . proto . port -> goto chain) for ClusterIPs, externalIPs
// and LB VIPs; service-nodeports (proto . port) on nodeport-ips or, with "all
// addresses", on "fib daddr type local" minus loopback; firewall-ips for
// loadBalancerSourceRanges; no-endpoint-services / no-endpoint-nodeports (drop, or
// goto reject-chain) checked from the filter hooks; cluster-ips for masquerading
// non-local ClusterIP traffic and rejecting invalid ports, plus a drop of the rest
// of the ServiceCIDRs. Masquerading is requested with a mark bit and done in
// masquerading; hairpin traffic (a pod reaching itself through a Service) is
// masqueraded by one global rule matching "ct status dnat" and the set
// hairpin-connections of (ip . ip . proto . port) of local endpoints, not by a rule
// per endpoint.
//
// Per ServicePort (names "<prefix>HASH-ns/name/proto/port", HASH = 8 base32 chars of
// the SHA-256 of the rest, so unique, deterministic and at most 256 bytes):
//
//	service-…   Cluster-policy endpoints, local-… Local-policy endpoints
//	external-…  NodePort/externalIP/LB traffic: masquerade (eTP Cluster) or the
//	            short-circuits of pod and node traffic (eTP Local), then policy chain
//	firewall-…  "saddr != { ranges } drop" for loadBalancerSourceRanges
//
// # Choices for scale
//
// Endpoint selection uses no chain per endpoint and, for Services with up to
// Config.EndpointRulesMax endpoints (default 32), no set either: one rule per
// endpoint, iptables-style, rule i matching with probability 1/(N-i)
// ("numgen random mod N-i 0 meta l4proto tcp dnat to ip:port"), the last one always
// (a plain "dnat to" for a single endpoint). Larger Services use upstream's single
// rule "dnat ip addr . port to numgen random mod N map { 0 : ip . port , … }".
// Measured on kernel 6.18 with nft 1.0.6: the kernel creates sets, anonymous or
// named, in time linear in the size of the transaction and of the table (set
// creation and binding walk the transaction and the table's sets), so one set per
// Service made a full sync of 10,000 Services x 10 endpoints take 42 s (30 s of it in
// the kernel); with rules it takes 3.7 s through "nft -f" (2.2 s of it parsing in
// nft userspace, 1.4 s in the kernel). A map shared by all Services does not help:
// every element added to a map is validated against every rule bound to it.
// An endpoint change rewrites one chain (flush + N rules).
//
// Config.EndpointMaps (endpoints.go) selects endpoints of Services without affinity
// from shared data maps instead: each policy chain has one rule (two with a
// NodePort), "dnat ip addr . port to ip daddr . tcp dport . numgen random mod N map
// @service-endpoints-tcp-SS", and the map holds "frontend . port . slot : endpoint .
// port" for every frontend that reaches the chain. Replacing an endpoint then changes
// map elements only. The kernel re-validates the whole table (loops, hooks allowed
// for dnat) at the commit of any transaction that adds a rule with a verdict, a
// dnat, a masquerade or a mark statement, or a jump/goto map element; that costs
// ~20-30 ms at 10,000 Services x 10 endpoints with rules per endpoint and a fifth of
// that with the maps (fewer rules to walk), while element changes are not
// validated. Maps are sharded (256 per kind and protocol, by a hash of the
// ServicePort name) because the kernel finds sets by a linear search and checks
// every element of a map against every rule bound to it; a map is declared by every
// fragment using it and exists while one does (State counts them).
//
// Session affinity needs a per-endpoint update of an affinity set, so only Services
// with affinity get per-endpoint chains (endpoint-…) and sets (affinity-…, dynamic,
// with the stickiness timeout; the set name hashes the timeout too, because a set's
// timeout cannot change in place). They are the expensive case at scale.
//
// Plan emits only the delta: new chains and sets first, changed chains flushed and
// rewritten, then element deletions and additions (a map element whose value
// changes is deleted and re-added, as the kernel refuses to overwrite it), then
// deletion of the chains and sets no longer used, in the same transaction, after the
// map elements that referenced them (PlanOptions.DeferChainDeletes defers chain
// deletion to a later transaction, for kernels before 6.2). Elements are reference
// counted across fragments (ports of one Service share their ClusterIP; Services
// sharing a backend share a hairpin entry), so an element goes only with its last
// claimant.
//
// # Localhost NodePorts
//
// NodePorts are never DNATed on loopback. With Config.LocalhostNodePorts (upstream's
// KubeProxyNFTablesLocalhostNodePorts gate) the base fragment adds, as upstream, the
// named counters localhost-nodeport-rejected-<proto> (Fragment.Counters), a chain
// localhost-nodeport-reject-<proto> per rejected protocol ("counter name ...
// reject"), the map localhost-nodeport-reject-ports and a second rule in
// nodeport-endpoints-check sending loopback destinations through it; every NodePort
// of a rejected protocol adds its element. TCP is rejected only when no userspace
// proxy (internal/localnodeports) serves it. Counters are added before the rules
// naming them and deleted after; a refresh keeps their values and deletes those of
// Existing.Counters it no longer renders.
package nftables
