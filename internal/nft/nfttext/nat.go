package nfttext

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// NATTarget is where a dnat or snat statement sends the packet.
type NATTarget struct {
	Addr    netip.Addr
	Port    uint16
	HasPort bool
}

// String is the target as "addr", "addr:port" or "[addr6]:port".
func (t NATTarget) String() string {
	if !t.HasPort {
		return t.Addr.String()
	}
	return net.JoinHostPort(t.Addr.String(), strconv.Itoa(int(t.Port)))
}

// ParseNATTarget reads a nat target given as one word ("10.0.0.1", "10.0.0.1:80",
// "[fd00::1]:80", "fd00::1") or as an address and a port (NAT.To of "ADDR . PORT",
// or the words of a nat map's value). family ("ip", "ip6" or "") constrains the
// address.
func ParseNATTarget(words []string, family string) (NATTarget, error) {
	var t NATTarget
	var addr, port string
	switch len(words) {
	case 1:
		s := words[0]
		switch {
		case strings.HasPrefix(s, "["):
			host, p, err := net.SplitHostPort(s)
			if err != nil {
				return t, fmt.Errorf("bad nat target %q: %w", s, err)
			}
			addr, port = host, p
		case strings.Count(s, ":") == 1:
			addr, port, _ = strings.Cut(s, ":")
		default:
			addr = s
		}
	case 2:
		addr, port = words[0], words[1]
	default:
		return t, fmt.Errorf("bad nat target %q", strings.Join(words, " . "))
	}
	a, err := netip.ParseAddr(addr)
	if err != nil || a.Zone() != "" {
		return t, fmt.Errorf("bad nat target address %q", addr)
	}
	if (family == "ip" && !a.Is4()) || (family == "ip6" && !a.Is6()) {
		return t, fmt.Errorf("nat target %q does not match family %q", addr, family)
	}
	t.Addr = a
	if port != "" {
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return t, fmt.Errorf("bad nat target port %q", port)
		}
		t.Port, t.HasPort = uint16(p), true
	}
	return t, nil
}
