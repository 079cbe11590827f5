package ipvs

import (
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
)

// IP protocol numbers (IANA), which IPVS stores in a service's protocol.
const (
	protoTCP  = 6
	protoUDP  = 17
	protoSCTP = 132
)

// Address families (AF_INET, AF_INET6), which IPVS stores with every service
// and destination. Written out rather than taken from x/sys/unix so that the
// conversions build and are tested everywhere.
const (
	afInet  = 2
	afInet6 = 10
)

// protocolNumber is p's IP protocol number.
func protocolNumber(p v1.Protocol) (uint16, error) {
	switch p {
	case v1.ProtocolTCP:
		return protoTCP, nil
	case v1.ProtocolUDP:
		return protoUDP, nil
	case v1.ProtocolSCTP:
		return protoSCTP, nil
	}
	return 0, fmt.Errorf("protocol %q: IPVS balances only TCP, UDP and SCTP", p)
}

// protocolName is the inverse of protocolNumber.
func protocolName(n uint16) (v1.Protocol, error) {
	switch n {
	case protoTCP:
		return v1.ProtocolTCP, nil
	case protoUDP:
		return v1.ProtocolUDP, nil
	case protoSCTP:
		return v1.ProtocolSCTP, nil
	}
	return "", fmt.Errorf("IP protocol %d is not TCP, UDP or SCTP", n)
}

// addressFamily is a's family and the netmask IPVS wants with it: a whole
// address (/32 as a mask, /128 as a prefix length), as upstream writes it.
func addressFamily(a netip.Addr) (family uint16, netmask uint32, err error) {
	switch {
	case a.Is4():
		return afInet, 0xffffffff, nil
	case a.Is6() && !a.Is4In6():
		return afInet6, 128, nil
	}
	return 0, 0, fmt.Errorf("address %v is neither IPv4 nor IPv6", a)
}

// GracefulTerminationNeeded reports whether real servers of protocol p wait
// for their connections to end before removal. Upstream removes UDP and SCTP
// real servers at once (their flows are expired on their next packet, with
// the expire_nodest_conn sysctl); TCP ones drain.
func GracefulTerminationNeeded(p v1.Protocol) bool {
	return p != v1.ProtocolUDP && p != v1.ProtocolSCTP
}

// checkKey reports what makes k unusable in a request: a family other than
// IPv4 and IPv6, a protocol other than TCP, UDP and SCTP.
func checkKey(k Key) error {
	if _, _, err := addressFamily(k.Address); err != nil {
		return fmt.Errorf("virtual server %s: %w", k, err)
	}
	if _, err := protocolNumber(k.Protocol); err != nil {
		return fmt.Errorf("virtual server %s: %w", k, err)
	}
	return nil
}

// Schedulers returns the IPVS schedulers of Linux 6.2 and later
// (net/netfilter/ipvs; twos is the one 6.1 lacks), by the names a virtual
// server takes; each is a module of its own (ip_vs_NAME), loaded by the
// kernel when a service first uses it.
func Schedulers() []string {
	return []string{"rr", "wrr", "lc", "wlc", "fo", "ovf", "lblc", "lblcr", "dh", "sh", "sed", "nq", "mh", "twos"}
}
