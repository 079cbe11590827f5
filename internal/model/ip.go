package model

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"
	netutils "k8s.io/utils/net"
)

// parseAddr parses an IP as upstream does (leading zeros in IPv4 octets are allowed, as
// older API servers stored them) and returns it unmapped, so IPv4-mapped IPv6 addresses
// count as IPv4 exactly as upstream's IPFamilyOf does.
func parseAddr(s string) (netip.Addr, bool) {
	ip := netutils.ParseIPSloppy(s)
	if ip == nil {
		return netip.Addr{}, false
	}
	addr, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}, false
	}
	return addr.Unmap(), true
}

// parsePrefix parses a CIDR sloppily (see parseAddr) and returns its masked network.
func parsePrefix(s string) (netip.Prefix, bool) {
	_, ipnet, err := netutils.ParseCIDRSloppy(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	addr, ok := netip.AddrFromSlice(ipnet.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := ipnet.Mask.Size()
	addr = addr.Unmap()
	if addr.Is4() && ones > 32 {
		// A 16-byte mask over an IPv4 network: keep only the IPv4 part.
		ones -= 96
	}
	return netip.PrefixFrom(addr, ones).Masked(), true
}

// familyOf returns the IP family of a valid address.
func familyOf(addr netip.Addr) v1.IPFamily {
	if addr.Is4() {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

// InFamily reports whether a is an address of family as the renderers write it:
// IPv4, or IPv6 that is not IPv4-mapped (which no ruleset of either family
// matches as written).
func InFamily(a netip.Addr, family v1.IPFamily) bool {
	if family == v1.IPv6Protocol {
		return a.Is6() && !a.Is4In6()
	}
	return a.Is4()
}

// EndpointsInFamily returns the endpoints of eps whose address is of family
// (InFamily), without nil ones: eps itself when that is all of them (the common
// case, no copy; views' lists are read-only), else a new slice.
func EndpointsInFamily(eps []*Endpoint, family v1.IPFamily) []*Endpoint {
	i := 0
	for i < len(eps) && eps[i] != nil && InFamily(eps[i].IP, family) {
		i++
	}
	if i == len(eps) {
		return eps
	}
	out := make([]*Endpoint, i, len(eps))
	copy(out, eps[:i])
	for _, ep := range eps[i+1:] {
		if ep != nil && InFamily(ep.IP, family) {
			out = append(out, ep)
		}
	}
	return out
}
