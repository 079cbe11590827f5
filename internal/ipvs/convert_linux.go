package ipvs

import (
	"fmt"
	"net"
	"net/netip"

	libipvs "github.com/moby/ipvs"
)

// toService converts a virtual server to moby/ipvs's service.
func toService(vs VirtualServer) (*libipvs.Service, error) {
	svc, err := keyService(vs.Key())
	if err != nil {
		return nil, err
	}
	svc.SchedName = vs.Scheduler
	// FlagHashed is the kernel's own; writing it back is harmless but keep
	// what we send to the flags we mean.
	svc.Flags = uint32(vs.Flags &^ FlagHashed)
	svc.Timeout = vs.Timeout
	return svc, nil
}

// keyService is the service that names k in a request (delete, list of
// destinations): the kernel finds a service by family, protocol, address and
// port.
func keyService(k Key) (*libipvs.Service, error) {
	if err := checkKey(k); err != nil {
		return nil, err
	}
	family, netmask, _ := addressFamily(k.Address)
	proto, _ := protocolNumber(k.Protocol)
	return &libipvs.Service{
		Address:       net.IP(k.Address.AsSlice()),
		Protocol:      proto,
		Port:          k.Port,
		AddressFamily: family,
		Netmask:       netmask,
	}, nil
}

// fromService converts a service read from the kernel. ok is false for a
// firewall-mark service, which has no address, protocol or port: kproxy
// never creates one and a Key cannot name it.
func fromService(svc *libipvs.Service) (vs VirtualServer, ok bool, err error) {
	if svc.FWMark != 0 {
		return VirtualServer{}, false, nil
	}
	addr, err := fromIP(svc.Address, svc.AddressFamily)
	if err != nil {
		return VirtualServer{}, false, fmt.Errorf("IPVS service: %w", err)
	}
	proto, err := protocolName(svc.Protocol)
	if err != nil {
		return VirtualServer{}, false, fmt.Errorf("IPVS service %v port %d: %w", addr, svc.Port, err)
	}
	return VirtualServer{
		Address:   addr,
		Protocol:  proto,
		Port:      svc.Port,
		Scheduler: svc.SchedName,
		// The kernel sets FlagHashed on every service it holds; dropping it
		// makes what is read compare equal to what was written.
		Flags:   Flags(svc.Flags) &^ FlagHashed,
		Timeout: svc.Timeout,
	}, true, nil
}

// toDestination converts a real server; only address, port and weight are
// written (the forwarding method is masquerading, moby/ipvs's zero value,
// as upstream's).
func toDestination(rs RealServer) (*libipvs.Destination, error) {
	family, _, err := addressFamily(rs.Address)
	if err != nil {
		return nil, fmt.Errorf("real server %v: %w", rs.AddrPort(), err)
	}
	return &libipvs.Destination{
		Address:       net.IP(rs.Address.AsSlice()),
		Port:          rs.Port,
		Weight:        rs.Weight,
		AddressFamily: family,
	}, nil
}

// fromDestination converts a destination read from the kernel.
func fromDestination(d *libipvs.Destination, serviceFamily uint16) (RealServer, error) {
	family := d.AddressFamily
	if family == 0 {
		// Kernels before 3.18 do not report a destination's family; it is
		// then the service's.
		family = serviceFamily
	}
	addr, err := fromIP(d.Address, family)
	if err != nil {
		return RealServer{}, fmt.Errorf("IPVS destination: %w", err)
	}
	return RealServer{
		Address:             addr,
		Port:                d.Port,
		Weight:              d.Weight,
		ActiveConnections:   d.ActiveConnections,
		InactiveConnections: d.InactiveConnections,
	}, nil
}

// fromIP converts an address of the given family as moby/ipvs parses it (4
// or 16 bytes).
func fromIP(ip net.IP, family uint16) (netip.Addr, error) {
	addr, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}, fmt.Errorf("malformed address %v", []byte(ip))
	}
	switch family {
	case afInet:
		addr = addr.Unmap()
		if !addr.Is4() {
			return netip.Addr{}, fmt.Errorf("address %v in family AF_INET", addr)
		}
	case afInet6:
		if !addr.Is6() {
			addr = netip.AddrFrom16(addr.As16())
		}
	default:
		return netip.Addr{}, fmt.Errorf("address %v of unknown family %d", addr, family)
	}
	return addr, nil
}
