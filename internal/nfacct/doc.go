// Package nfacct manages nfacct objects: named packet and byte counters of the
// kernel's nfnetlink_acct subsystem that iptables rules increment with
// "-m nfacct --nfacct-name <name>". The iptables proxier uses two, as upstream does,
// for kubeproxy_iptables_ct_state_invalid_dropped_packets_total and
// kubeproxy_iptables_localhost_nodeports_accepted_packets_total.
//
// Interface is the boundary; Netlink talks to the kernel of one network namespace
// and Fake keeps counters in memory for unit tests. Counters live in the network
// namespace, whatever the IP family, so both families' proxiers share them.
package nfacct
