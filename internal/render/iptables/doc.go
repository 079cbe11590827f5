// Package iptables is kproxy's pure iptables renderer: it turns the model (one
// model.ServicePortView per ServicePort) into upstream kube-proxy v1.37's iptables
// rules for one family, and turns (last applied, desired) into a minimal
// iptables-restore input for --noflush. It does no I/O, does not log and keeps no
// global state: the dataplane (internal/dataplane/iptables) runs what it writes.
//
// # API
//
//	cfg.Validate() error
//	RenderBase(cfg) Fragment                  the chains that are not per Service
//	RenderService(cfg, view) Fragment         one ServicePort's chains and entries
//	RenderServices(cfg, views) map[name]*Fragment
//	JumpRules() []Jump                        jumps from the built-in chains
//	NewState(base, services) *State           what a full sync programs
//	WriteFull(buf, state, existing) Written   restore input of a full sync
//	state.Plan(buf, base, updates) *Plan      restore input of the delta only
//	state.Commit(plan)                        after the restore succeeded
//	CompareTables(ctx, state, kernel, jumps, owned, r)
//	                                          drift: how iptables-save's tables differ
//	                                          from a State (the iptables and ipvs modes)
//
// Typical sync loop:
//
//	first sync, after a failure, after a flush (canary), periodically:
//	    ensure JumpRules (EnsureChain + EnsureRule, prepend)
//	    st := NewState(&base, RenderServices(cfg, views))
//	    WriteFull(buf, st, iptables.ChainsInSave(save of nat)); restore; applied = st
//	otherwise, with the ServicePorts that changed (nil fragment = deleted):
//	    plan := applied.Plan(buf, nil /* or &newBase */, updates); restore if buf is not empty; applied.Commit(plan)
//
// # Behaviour
//
// The rules are upstream's (pkg/proxy/iptables/proxier.go), with upstream's chain
// names, hashes and comments, so other software that relies on them (KUBE-SERVICES,
// KUBE-MARK-MASQ, KUBE-POSTROUTING, ...) keeps working and a node switching from
// kube-proxy to kproxy or back keeps its chains. Every rule is rendered exactly as
// iptables-save prints it (address part, then matches in order, then target;
// comments quoted as xtables_save_string does; "--probability" as stored by the
// kernel, "-m recent" with its default mask and side; MARK as --set-xmark): "-D"
// then finds it, and the kernel tests check that a restore followed by iptables-save
// gives back the same text with both the nft and the legacy backend.
//
// Behaviours absent from upstream's iptables mode are absent here: traffic to
// ServiceCIDR addresses that are not ClusterIPs, or to ClusterIPs on ports the
// Service does not have, is neither rejected nor dropped (the nftables mode does
// both); localhost NodePorts are handled as upstream (route_localnet, IPv4 only,
// with the KUBE-FIREWALL martian drop), not by the nftables mode's userspace proxy.
//
// # Partial syncs
//
// Upstream rewrites the shared chains (KUBE-SERVICES with one rule per ClusterIP,
// external IP and LB VIP, KUBE-NODEPORTS, ...) in full at every sync: tens of
// thousands of lines in large clusters. Here a Fragment separates what a ServicePort
// owns (its KUBE-SVC-, KUBE-SVL-, KUBE-EXT-, KUBE-FW- and KUBE-SEP- chains, rewritten
// whole: declaring a chain in a --noflush restore flushes it) from its entries in the
// shared chains, which a partial restore changes one by one: "-D CHAIN RULE" for an
// entry that goes, "-I CHAIN 1 RULE" for one that comes (so the jump to
// KUBE-NODEPORTS stays the last rule of nat KUBE-SERVICES). Chains that go are
// flushed first and deleted ("-X") last, once no rule references them. A table
// without changes is left out of the input (the legacy backend rewrites every table
// the input names). The State tracks where each entry sits in its chain, so its
// Dump is what iptables-save prints after any sequence of restores. Identical
// entries may coexist (iptables allows it; "-D" removes one copy).
//
// A partial restore that fails leaves the kernel in an unknown state (the legacy
// backend commits table by table): the caller then does a full sync, which
// declares (flushes) and rewrites every chain of kproxy and deletes the
// per-ServicePort chains, ours or left by a previous proxy, that no Service renders.
// Chains of other software are never touched.
package iptables
