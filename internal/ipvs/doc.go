// Package ipvs is kproxy's boundary to the kernel's IP Virtual Server table (the
// ipvs mode): value types for virtual and real servers, and Interface, which the
// ipvs proxier programs and a fake implements in tests.
//
// Contract:
//
//   - Interface is implemented by Netlink (generic netlink through
//     github.com/moby/ipvs, as upstream, in the caller's or another network
//     namespace) and by Fake (in memory, with injectable errors and
//     connection counts).
//   - Conversions: addresses are netip.Addr (IPv4 is 4 bytes, never
//     IPv4-mapped IPv6), protocols v1.Protocol (TCP, UDP, SCTP: IP protocol
//     numbers 6, 17, 132 in the kernel), the address family follows the
//     address; a virtual server is a whole address (netmask /32 or /128), and
//     real servers are masqueraded (NAT), as upstream's. FlagHashed, which the
//     kernel sets on every service, is dropped on reading, so that what is read
//     equals what was written. Firewall-mark services, which kproxy never
//     creates and a Key cannot name, are not listed (and so never deleted but
//     by Flush).
//   - RealServers of a virtual server that does not exist is empty, not an
//     error: the kernel's dump of its destinations is empty.
//   - Errors are wrapped with what was asked (the virtual server, the real
//     server) and with ErrNotFound or ErrExists when the kernel's errno means
//     that; every call wraps ErrUnavailable when the kernel has no IPVS.
//     Netlink never loads the ip_vs module: it checks that the kernel has the
//     IPVS generic netlink family before moby/ipvs is first used (moby/ipvs
//     would otherwise run modprobe, and silently ignore every request of the
//     process when the family was missing then: its issue 27). The kernel
//     does load a scheduler's module (ip_vs_rr, ...) when a service first
//     uses it.
//   - GracefulTermination removes real servers as upstream's
//     GracefulTerminationManager (weight 0, deletion when their connections
//     are gone, UDP and SCTP at once); it starts no goroutine: the caller runs
//     Run.
//   - CanUse is upstream's CanUseIPVSProxier: the ipset version and the
//     scheduler, with upstream's error texts.
//
// The kube-ipvs0 dummy link is in the subpackage dummy; the ipsets in
// internal/ipset.
package ipvs
