package ipvs

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	libipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

func TestServiceConversion(t *testing.T) {
	for _, tc := range []struct {
		name     string
		vs       VirtualServer
		family   uint16
		netmask  uint32
		protocol uint16
	}{
		{"ipv4 tcp", VirtualServer{Address: netip.MustParseAddr("10.96.0.1"), Protocol: v1.ProtocolTCP, Port: 443, Scheduler: "rr"}, afInet, 0xffffffff, 6},
		{"ipv6 udp persistent", VirtualServer{Address: netip.MustParseAddr("fd00:10:96::a"), Protocol: v1.ProtocolUDP, Port: 53, Scheduler: "sh", Flags: FlagPersistent | FlagSchedFlag1, Timeout: 10800}, afInet6, 128, 17},
		{"ipv4 sctp", VirtualServer{Address: netip.MustParseAddr("192.0.2.7"), Protocol: v1.ProtocolSCTP, Port: 3868, Scheduler: "mh"}, afInet, 0xffffffff, 132},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, err := toService(tc.vs)
			if err != nil {
				t.Fatal(err)
			}
			if svc.AddressFamily != tc.family || svc.Netmask != tc.netmask || svc.Protocol != tc.protocol {
				t.Errorf("family %d netmask %#x protocol %d, want %d %#x %d", svc.AddressFamily, svc.Netmask, svc.Protocol, tc.family, tc.netmask, tc.protocol)
			}
			if tc.vs.Address.Is4() && len(svc.Address) != net.IPv4len {
				t.Errorf("IPv4 address sent as %d bytes", len(svc.Address))
			}
			// The kernel hands back what was written, plus FlagHashed.
			svc.Flags |= uint32(FlagHashed)
			got, ok, err := fromService(svc)
			if err != nil || !ok {
				t.Fatalf("fromService = %v, %v", ok, err)
			}
			if diff := cmp.Diff(tc.vs, got, addrOpt); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServiceConversionErrors(t *testing.T) {
	for _, vs := range []VirtualServer{
		{Protocol: v1.ProtocolTCP, Port: 80, Scheduler: "rr"},
		{Address: netip.MustParseAddr("::ffff:10.0.0.1"), Protocol: v1.ProtocolTCP, Port: 80, Scheduler: "rr"},
		{Address: netip.MustParseAddr("10.0.0.1"), Protocol: "ICMP", Port: 80, Scheduler: "rr"},
	} {
		if _, err := toService(vs); err == nil {
			t.Errorf("toService(%+v) succeeded", vs)
		}
	}
	if _, _, err := fromService(&libipvs.Service{Address: net.IP{10, 0, 0, 1}, AddressFamily: afInet, Protocol: 1}); err == nil {
		t.Error("a service of protocol 1 was converted")
	}
}

func TestFirewallMarkServicesAreSkipped(t *testing.T) {
	_, ok, err := fromService(&libipvs.Service{FWMark: 7, AddressFamily: afInet, SchedName: "rr"})
	if ok || err != nil {
		t.Errorf("fromService(fwmark) = %v, %v; want skipped", ok, err)
	}
}

func TestDestinationConversion(t *testing.T) {
	for _, rs := range []RealServer{
		{Address: netip.MustParseAddr("10.0.0.1"), Port: 8080, Weight: 1},
		{Address: netip.MustParseAddr("fd00::1"), Port: 53, Weight: 0},
	} {
		d, err := toDestination(rs)
		if err != nil {
			t.Fatal(err)
		}
		d.ActiveConnections, d.InactiveConnections = 3, 4
		got, err := fromDestination(d, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := rs
		want.ActiveConnections, want.InactiveConnections = 3, 4
		if got != want {
			t.Errorf("round trip = %+v, want %+v", got, want)
		}
	}
	// moby/ipvs parses IPv4 destinations to 4 bytes and IPv6 to 16; an IPv4
	// address in 16 bytes of family AF_INET is still IPv4.
	got, err := fromDestination(&libipvs.Destination{Address: net.ParseIP("10.0.0.2"), Port: 1, AddressFamily: afInet}, afInet)
	if err != nil || got.Address != netip.MustParseAddr("10.0.0.2") {
		t.Errorf("fromDestination(16-byte IPv4) = %v, %v", got.Address, err)
	}
}

func TestKernelErrorWrapping(t *testing.T) {
	for _, tc := range []struct {
		errno error
		want  error
	}{
		{unix.ESRCH, ErrNotFound},
		{unix.ENOENT, ErrNotFound},
		{unix.EEXIST, ErrExists},
	} {
		err := kernelError("doing", tc.errno)
		if !errors.Is(err, tc.want) || !errors.Is(err, tc.errno) {
			t.Errorf("kernelError(%v) = %v: want it to wrap %v and the errno", tc.errno, err, tc.want)
		}
	}
}
