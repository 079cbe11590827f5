// Package differential runs upstream kube-proxy v1.37.2 (the pinned oracle,
// _output/bin/kube-proxy-upstream) and kproxy on the same inputs and compares what
// they do. It is the executable form of "drop-in replacement": every difference is
// either listed, with the reason an operator can accept it, in
// testdata/allowed-differences.yaml, or a test failure.
//
// Inputs: testdata/corpus/<name>.yaml, one case per file (Case): a command line, an
// optional config file (written byte for byte: duplicate and unknown fields are
// inputs too) and the aspects to compare. Each case runs in up to three phases:
//
//   - offline: both binaries, concurrently and with cases in parallel, in one private
//     network namespace of the lab, without an API server. Compared: the exit status,
//     standard output (--version), the flags --help lists, the YAML --write-config-to
//     wrote (structurally, leaf by leaf), the kind of failure (flag, decode,
//     complete, logging, validation, runtime: the phase upstream fails in), the field
//     path and message of every validation error (KubeProxyConfiguration.<...>), the
//     unknown and duplicate fields strict decoding reported, and how the final error
//     is printed. An offline proxy that gets past validation stops at
//     creating its API client (its kubeconfig, kubeadm's /var/lib/kube-proxy path,
//     does not exist here; the test fails if it does), before any sysctl.
//   - cleanup: for --cleanup cases, each binary in its own fresh private namespace
//     seeded with what upstream wrote in iptables and in nftables mode plus rules
//     that are not kube-proxy's (testdata/cleanup); compared: the exit status and
//     every iptables chain, rule and nftables table left. Cases with seed: ipvs
//     start instead from ipvs mode's live state as upstream left it in the test VM's
//     node1 for the lab's Service (testdata/cleanup/ipvs: the KUBE-* ipsets,
//     kube-ipvs0 with its addresses, the virtual and real servers in ipvsadm-save's
//     notation, the iptables chains of ipvs mode), plus a set, a dummy link,
//     virtual servers and iptables rules that are not kube-proxy's; what is left is
//     compared also by virtual server (with its real servers), ipset (type and
//     members) and link (kind, state, addresses).
//   - lab: for cases with a lab part, each binary in turn in the lab's node1 with the
//     same config file (kubeadm's kubeconfig path pointing at the lab's API server),
//     against the same API objects (a dual-stack NodePort Service with an endpoint
//     on each node). Between runs node1's rules, conntrack table and the node's Events
//     are reset. Compared after the first sync of both families: whether it ran or
//     exited (and how), /configz (structurally), /proxyMode, the node's Events
//     (reason, type, note, action, reporting controller), and /metrics: every family
//     upstream exposes must exist in kproxy with the same type and label names
//     (families only kproxy has are not differences).
//
// The VM's share: this machine's kernel has no IPVS, so the cases with vm: true (the
// ipvs-seeded --cleanup cases and a lab run in ipvs mode) run only in the test VM
// with Debian 12's kernel (test/vm). TestDifferentialInVM, on the host, packs both
// binaries and this package's test binary and runs TestDifferential in the VM, as
// test/e2e/vmsuite runs its suite: the VM's lab uses the host lab's API server over
// a tap (lab.ExternalControlPlane). TestDifferential runs the VM cases in the VM and
// the others everywhere else. In the VM the cleanup cases run one at a time and an
// offline run is bounded by 2 minutes instead of 30 s (emulated CPUs). Between the
// lab runs node1's ipvs state (virtual servers, kube-ipvs0, ipsets) is reset too.
//
// Contract:
//   - TestDifferentialInVM runs only with KPROXY_E2E_VM=1 (hack/vm-test.sh's step of
//     make test, after the vmsuite); elsewhere it skips with the reason, and without
//     root, the VM's assets, qemu or either binary it skips (fails under
//     KPROXY_E2E_REQUIRED=1).
//   - One lab per package (TestMain); everything runs in namespaces the lab creates and
//     deletes; the root network namespace is never touched. A lab case whose effective
//     configuration (upstream's --write-config-to for the same arguments) would make
//     a proxy resize the host-wide conntrack hash table is skipped with the reason.
//   - Without root, the lab's binaries or the upstream binary ($KPROXY_UPSTREAM_BIN
//     overrides its path) the test skips with the reason; with KPROXY_E2E_REQUIRED=1 it
//     fails instead; in -short mode it skips, KPROXY_E2E_REQUIRED=1 or not. The corpus
//     and allow-list checks and the comparison logic's unit tests run everywhere.
//   - Every wait is a bounded condition that says what it awaited.
//   - The allow-list cannot rot: an entry that is about something compared in this run
//     (its case glob and aspect) but matched no difference fails the test. An entry
//     whose case glob matches only VM cases is judged by the VM's run, every other
//     entry by the run outside the VM (Allowance.VMOnly). Entries
//     whose reason starts with "PENDING:" are known, unintended differences being
//     fixed; they go when the fix lands.
package differential
