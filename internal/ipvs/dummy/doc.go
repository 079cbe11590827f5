// Package dummy manages kube-ipvs0, the dummy link the ipvs mode binds every
// Service address to, so that the node accepts packets for them and IPVS
// (hooked at LOCAL_IN) balances them.
//
// Contract:
//
//   - Interface is implemented by Netlink (vishvananda/netlink, in the
//     caller's or another network namespace) and by Fake.
//   - EnsureLink creates kube-ipvs0 as a dummy link and leaves it down, as
//     upstream does: a dummy link's addresses are local whether it is up or
//     not, and a link that stays down never answers ARP or neighbour
//     solicitations for them, nor gets an IPv6 link-local address. An
//     existing link of that name is used as it is, as upstream uses it.
//   - Addresses are whole addresses (/32, /128), as upstream binds them.
//     Adding one that is bound and deleting one that is not are no-ops.
//   - Reads return addresses of both families, sorted; filtering by family,
//     loopback or link-local is the caller's (upstream's isValidForSet).
//   - Errors wrap netlink's; ErrLinkNotFound when kube-ipvs0 does not exist.
package dummy
