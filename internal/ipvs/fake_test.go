package ipvs

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
)

var (
	vsTCP = VirtualServer{Address: netip.MustParseAddr("10.96.0.1"), Protocol: v1.ProtocolTCP, Port: 443, Scheduler: "rr"}
	vsUDP = VirtualServer{Address: netip.MustParseAddr("10.96.0.10"), Protocol: v1.ProtocolUDP, Port: 53, Scheduler: "rr"}
	vs6   = VirtualServer{Address: netip.MustParseAddr("fd00::1"), Protocol: v1.ProtocolSCTP, Port: 80, Scheduler: "mh", Flags: FlagSchedFlag1 | FlagSchedFlag2}
	rs1   = netip.MustParseAddrPort("10.0.0.1:8443")
	rs2   = netip.MustParseAddrPort("10.0.0.2:8443")
)

func realServer(ap netip.AddrPort, weight int) RealServer {
	return RealServer{Address: ap.Addr(), Port: ap.Port(), Weight: weight}
}

func mustDo(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestFakeVirtualServers(t *testing.T) {
	f := NewFake()
	mustDo(t, f.AddVirtualServer(vs6), f.AddVirtualServer(vsUDP), f.AddVirtualServer(vsTCP))
	if err := f.AddVirtualServer(vsTCP); !errors.Is(err, ErrExists) {
		t.Errorf("second add = %v, want ErrExists", err)
	}
	persistent := vsTCP
	persistent.Flags, persistent.Timeout = FlagPersistent|FlagHashed, 10800
	mustDo(t, f.UpdateVirtualServer(persistent))
	persistent.Flags = FlagPersistent // the kernel's flag is not kept

	got, err := f.VirtualServers()
	mustDo(t, err)
	if diff := cmp.Diff([]VirtualServer{persistent, vsUDP, vs6}, got, addrOpt); diff != "" {
		t.Errorf("VirtualServers (-want +got):\n%s", diff)
	}

	mustDo(t, f.DeleteVirtualServer(vsUDP.Key()))
	if err := f.DeleteVirtualServer(vsUDP.Key()); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete = %v, want ErrNotFound", err)
	}
	if err := f.UpdateVirtualServer(vsUDP); !errors.Is(err, ErrNotFound) {
		t.Errorf("update of a missing service = %v, want ErrNotFound", err)
	}
	bad := vsUDP
	bad.Scheduler = "nope"
	if err := f.AddVirtualServer(bad); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown scheduler = %v, want ErrNotFound (the kernel's ENOENT)", err)
	}
	mustDo(t, f.Flush())
	if got, _ := f.VirtualServers(); len(got) != 0 {
		t.Errorf("after Flush: %v", got)
	}
}

func TestFakeRealServers(t *testing.T) {
	f := NewFake()
	k := vsTCP.Key()
	if err := f.AddRealServer(k, realServer(rs1, 1)); !errors.Is(err, ErrNotFound) {
		t.Errorf("add to a missing service = %v, want ErrNotFound", err)
	}
	mustDo(t, f.AddVirtualServer(vsTCP), f.AddRealServer(k, realServer(rs2, 1)), f.AddRealServer(k, realServer(rs1, 1)))
	if err := f.AddRealServer(k, realServer(rs1, 1)); !errors.Is(err, ErrExists) {
		t.Errorf("second add = %v, want ErrExists", err)
	}
	if err := f.AddRealServer(k, realServer(netip.MustParseAddrPort("[fd00::2]:80"), 1)); err == nil {
		t.Error("an IPv6 real server was added to an IPv4 service")
	}
	mustDo(t, f.UpdateRealServer(k, realServer(rs1, 0)), f.SetConnections(k, rs1, 2, 5))

	got, err := f.RealServers(k)
	mustDo(t, err)
	want := []RealServer{{Address: rs1.Addr(), Port: rs1.Port(), Weight: 0, ActiveConnections: 2, InactiveConnections: 5}, realServer(rs2, 1)}
	if diff := cmp.Diff(want, got, addrOpt); diff != "" {
		t.Errorf("RealServers (-want +got):\n%s", diff)
	}

	mustDo(t, f.DeleteRealServer(k, rs1))
	if err := f.DeleteRealServer(k, rs1); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete = %v, want ErrNotFound", err)
	}
	if err := f.UpdateRealServer(k, realServer(rs1, 1)); !errors.Is(err, ErrNotFound) {
		t.Errorf("update of a missing real server = %v, want ErrNotFound", err)
	}
}

func TestFakeInjectedErrorsAndCalls(t *testing.T) {
	f := NewFake()
	boom := errors.New("boom")
	f.SetError("AddVirtualServer", boom)
	if err := f.AddVirtualServer(vsTCP); !errors.Is(err, boom) {
		t.Errorf("AddVirtualServer = %v, want the injected error", err)
	}
	if got, _ := f.VirtualServers(); len(got) != 0 {
		t.Error("a failed add changed the table")
	}
	f.SetError("AddVirtualServer", nil)
	mustDo(t, f.AddVirtualServer(vsTCP), f.AddRealServer(vsTCP.Key(), realServer(rs1, 1)), f.DeleteRealServer(vsTCP.Key(), rs1))
	want := []string{
		"AddVirtualServer TCP 10.96.0.1:443 rr",
		"VirtualServers",
		"AddVirtualServer TCP 10.96.0.1:443 rr",
		"AddRealServer TCP 10.96.0.1:443 10.0.0.1:8443 weight 1",
		"DeleteRealServer TCP 10.96.0.1:443 10.0.0.1:8443",
	}
	if diff := cmp.Diff(want, f.Calls(), addrOpt); diff != "" {
		t.Errorf("Calls (-want +got):\n%s", diff)
	}
}

func TestFakeTimeouts(t *testing.T) {
	f := NewFake()
	mustDo(t, f.SetTimeouts(Timeouts{TCP: 900 * time.Second, UDP: 300 * time.Second}), f.SetTimeouts(Timeouts{TCPFin: 120 * time.Second}))
	if got, want := f.Timeouts(), (Timeouts{TCP: 900 * time.Second, TCPFin: 120 * time.Second, UDP: 300 * time.Second}); got != want {
		t.Errorf("Timeouts = %+v, want %+v (0 leaves a timeout unchanged)", got, want)
	}
}

func TestGracefulTerminationNeeded(t *testing.T) {
	for p, want := range map[v1.Protocol]bool{v1.ProtocolTCP: true, v1.ProtocolUDP: false, v1.ProtocolSCTP: false} {
		if got := GracefulTerminationNeeded(p); got != want {
			t.Errorf("GracefulTerminationNeeded(%s) = %v, want %v", p, got, want)
		}
	}
}

// addrOpt compares netip values (which cmp cannot look into) with ==.
var addrOpt = cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{})
