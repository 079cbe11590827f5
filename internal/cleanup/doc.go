// Package cleanup removes the dataplane rules left behind by kproxy or by
// upstream kube-proxy (v1.37) in any of its Linux modes: nftables, iptables
// and ipvs. It removes nothing else.
//
// Contract:
//
//   - All removes the leftovers of every mode (the daemon's --cleanup).
//     ForMode removes the leftovers of the modes other than the one about to
//     run, as upstream's platformCleanup does: an nftables proxy removes the
//     iptables and ipvs leftovers (so switching from iptables to nftables
//     mode leaves none of the proxy's chains behind), an iptables or ipvs
//     proxy removes the nftables leftovers (the "kube-proxy" tables of both
//     families).
//   - Ownership is decided by name, from upstream's own lists: the
//     "kube-proxy" nftables table in the ip and ip6 families; the fixed
//     KUBE-* chains of the iptables and ipvs proxiers plus the per-service
//     chains (KUBE-SVC-, KUBE-SVL-, KUBE-SEP-, KUBE-FW-, KUBE-EXT-); the jump
//     rules into them from the built-in chains, matched exactly (comment
//     included); the ipvs proxier's ipsets (and their KUBE-6- IPv6 twins); the
//     kube-ipvs0 dummy link; and the IPVS virtual servers. Chains owned by the
//     kubelet (KUBE-IPTABLES-HINT, KUBE-KUBELET-CANARY, KUBE-FIREWALL) and any
//     other software's tables, chains, rules and sets are left alone.
//   - Errors: every part runs even when an earlier part failed; the result
//     joins (errors.Join) one wrapped error per failed part, or is nil.
//     Something that is already absent ("no such table/chain/set/link") is
//     not an error, nor is a missing tool (no nft, iptables or ipset binary)
//     or a kernel without IPVS (logged at V(2)).
//
// Where kproxy deliberately differs from upstream (each is a superset of what
// upstream removes, restricted to names upstream owns):
//
//   - The iptables parts of the iptables and ipvs proxiers are removed in one
//     iptables-restore transaction per table instead of two passes, so that a
//     host with leftovers of both modes (which reference each other's
//     KUBE-MARK-MASQ and KUBE-SERVICES) is cleaned without spurious errors.
//   - Upstream skips all ipvs cleanup when `modprobe ip_vs` fails; kproxy never
//     loads kernel modules, and removes the ipvs-mode chains, sets and link by
//     name regardless, flushing IPVS virtual servers only when the kernel has
//     IPVS.
//   - Upstream destroys only the IPv4-named ipvs ipsets; kproxy also destroys
//     their "KUBE-6-" IPv6 counterparts.
//   - Upstream tries to delete each jump rule and each ipset by name; kproxy
//     first reads the nat and filter tables (iptables-save) and the ipset
//     names (ipset list -n), and deletes only the jumps whose target chain
//     exists and the sets that exist (every name when a read fails). The
//     result is the same; a node without leftovers is cleaned with 14
//     processes per start instead of about 80 (kube-proxy --cleanup in an
//     empty namespace: 0.18 s of CPU instead of 0.48 s), CPU that the first
//     lists of the API server are decoded with.
//   - Upstream's image runs a wrapper that picks iptables-legacy or
//     iptables-nft; kproxy runs the binaries directly and makes the same
//     choice with iptables.DetectBackend.
//
// iptables is reached through internal/iptables (the same runner the
// iptables mode's dataplane writes with), IPVS through internal/ipvs and the
// ipsets through internal/ipset (the ipvs mode's boundaries); tests use
// their Fakes.
package cleanup
