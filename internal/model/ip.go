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
