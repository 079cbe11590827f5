// Package iptables is kproxy's boundary to one IP family's iptables: the
// iptables mode's dataplane writes through it, and internal/cleanup removes
// the iptables and ipvs modes' leftovers through it. One runner serves both.
//
// Contract:
//
//   - Interface is the whole boundary. Exec implements it by running the
//     (ip6)iptables, -save and -restore binaries of one backend through
//     k8s.io/utils/exec; Fake implements it in memory for tests, with the
//     semantics of the real binaries that kproxy relies on (see Fake).
//   - Constructors (New, NewFake) run nothing. DetectBackend runs only
//     iptables-save commands and never changes the ruleset.
//   - Every iptables command waits for the xtables lock with a bound, as
//     upstream kube-proxy does: "-w 5" (give up after 5 s instead of blocking
//     forever). iptables-restore also gets "-W 100000", the 100 ms lock poll
//     interval earlier upstream releases passed (v1.37 passes -w 5 only):
//     iptables 1.8.8 and later ignore it with a warning, older ones poll every
//     100 ms instead of every second. kproxy never holds the lock longer than
//     one command, so other software on the node is never starved of it.
//   - Restore always runs with --noflush --counters: only the chains the
//     input declares are flushed, never whole tables (other software's chains
//     in the same tables stay). Each "*table ... COMMIT" section is applied
//     atomically by the kernel; when a later section fails, earlier sections
//     of the same input stay applied (both backends behave so).
//   - Errors are wrapped with %w and carry the command's output: a failing
//     restore returns a *RestoreError naming the failing input line, so a
//     caller can log the lines around it. "Already absent" is not an error for
//     DeleteRule and DeleteChain.
//   - ParseSave is kproxy's one reader of iptables-save output (tables, chain
//     declarations, rules split into arguments as iptables-restore splits them);
//     ChainsInSave and the iptables packet tracer (internal/trace/ipttrace) read
//     through it. It is pure. SaveTables lists and parses tables for the
//     iptables and ipvs modes' drift comparisons.
//   - Monitor is upstream's canary check (pkg/util/iptables Monitor): it
//     notices that someone flushed the tables and asks for a full resync.
//
// The backend choice follows upstream's image (kubernetes-sigs/iptables-
// wrappers), which kproxy does without a wrapper script: DetectBackend looks
// for the kubelet's hint chains in iptables-nft, then iptables-legacy, and
// defaults to nft; Exec then runs iptables-nft* or iptables-legacy*, or the
// plain binaries when those are not installed.
package iptables
