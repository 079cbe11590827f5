// Package drift is the vocabulary of kproxy's drift detection: a Difference is one
// object in which what the kernel holds differs from what kproxy last applied, and
// a Report is one comparison of one IP family. The comparisons themselves live with
// the code that reads each kernel interface (internal/nftnetlink's inventories,
// internal/render/iptables' chains for the iptables and ipvs modes, the ipvs
// proxier's listing of IPVS, its ipsets and kube-ipvs0); the proxiers run them (on the sync
// goroutine, so the applied state cannot change under a comparison), repair what
// they find with a full sync, and export the count in
// kubeproxy_kproxy_drift_objects. `kube-proxy verify` prints Reports.
//
// Contract: pure types and helpers; no I/O, no logging.
package drift
