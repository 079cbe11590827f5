// Package live reads a node's live ruleset, the one the kernel holds (not the one
// the model means it to hold), and loads it into the evaluator of the proxy's mode,
// for `kube-proxy trace`.
//
// Contract: Reader is the boundary to the kernel. Kernel implements it: the
// nftables table through `nft list table FAMILY kube-proxy` (the nft binary is in
// kproxy's image; its listing is read by internal/nft/nfttext, the one nft
// parser), iptables through internal/iptables' iptables-save of the backend the
// host uses (the filter and nat tables), and the node's addresses over netlink
// (kube-ipvs0's among them); for the ipvs mode also `ipset save` (read by
// internal/ipset.ParseSaveSets), the virtual and real servers of the family over
// generic netlink (internal/ipvs, only its listing calls), the persistence
// templates from /proc/net/ip_vs_conn, IPVS's conntrack sysctl, and the bridges
// br_netfilter shows to iptables. Fake holds canned answers for tests. Load composes a Reader with the
// evaluator of a mode (internal/trace/nfttrace, internal/trace/ipttrace,
// internal/trace/ipvstrace); it reads once and never writes to the kernel.
// Nothing here logs.
package live
