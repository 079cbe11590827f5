package nfttrace

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// natTarget is where a dnat/snat statement sends the packet.
type natTarget struct {
	addr    netip.Addr
	port    uint16
	hasPort bool
}

func (t natTarget) String() string {
	if !t.hasPort {
		return t.addr.String()
	}
	return net.JoinHostPort(t.addr.String(), strconv.Itoa(int(t.port)))
}

// parseNATTarget parses a nat target given as one token ("10.0.0.1", "10.0.0.1:80",
// "[fd00::1]:80", "fd00::1") or as an address and a port ("10.0.0.1" "80", from
// "addr . port" syntax or a map value). family ("ip"/"ip6"/"") constrains the address.
func parseNATTarget(comps []string, family string) (natTarget, error) {
	var t natTarget
	var addrStr, portStr string
	switch len(comps) {
	case 1:
		s := comps[0]
		switch {
		case strings.HasPrefix(s, "["):
			host, port, err := net.SplitHostPort(s)
			if err != nil {
				return t, fmt.Errorf("bad nat target %q: %w", s, err)
			}
			addrStr, portStr = host, port
		case strings.Count(s, ":") == 1:
			addrStr, portStr, _ = strings.Cut(s, ":")
		default:
			addrStr = s
		}
	case 2:
		addrStr, portStr = comps[0], comps[1]
	default:
		return t, fmt.Errorf("bad nat target %q", strings.Join(comps, " . "))
	}
	a, err := netip.ParseAddr(addrStr)
	if err != nil || a.Zone() != "" {
		return t, fmt.Errorf("bad nat target address %q", addrStr)
	}
	if (family == "ip" && !a.Is4()) || (family == "ip6" && !a.Is6()) {
		return t, fmt.Errorf("nat target %q does not match family %q", addrStr, family)
	}
	t.addr = a
	if portStr != "" {
		p, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil {
			return t, fmt.Errorf("bad nat target port %q", portStr)
		}
		t.port, t.hasPort = uint16(p), true
	}
	return t, nil
}
