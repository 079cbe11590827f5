// Package ipset is kproxy's boundary to the kernel's IP sets, which the ipvs mode's
// iptables rules match on: value types for sets and their entries, written as the
// ipset tool prints them.
//
// Contract:
//
//   - Interface is implemented by Exec, which runs the ipset binary through
//     k8s.io/utils/exec as upstream does (an Exec whose commands run in another
//     network namespace targets that namespace), and by Fake, in memory.
//   - Entries are strings in `ipset save` notation ("10.96.0.10,tcp:53",
//     "fd00::1,udp:53,fd00::1", "30080"). Nothing here rewrites them: what the
//     caller writes is compared, as text, with what the kernel prints, so a
//     caller writes the canonical form (lower-case protocol, numeric port,
//     IPv6 as net/netip prints it, a network with its prefix length except a
//     host's).
//   - Writing is one `ipset restore -exist` per change: Plan (pure) turns the
//     desired contents of kproxy's sets and what the kernel holds now into the
//     smallest script (create the missing sets with upstream's options, delete
//     stale entries, add missing ones), and Restore runs it; Plan is Script of
//     Diff, which the ipvs mode's drift detection also reads. Sets that are not
//     desired are not touched by Plan; Destroy removes one.
//   - A set or entry that is already absent is not an error when destroying
//     or deleting; errors wrap the tool's exit status and message, and
//     ErrNotFound when a named set does not exist.
package ipset
