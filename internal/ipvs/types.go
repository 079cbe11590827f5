package ipvs

import (
	"fmt"
	"net/netip"
	"time"

	v1 "k8s.io/api/core/v1"
)

// VirtualServer is one IPVS service (ipvsadm's "virtual server"): an address,
// protocol and port that the kernel balances over its real servers.
type VirtualServer struct {
	Address  netip.Addr
	Protocol v1.Protocol // TCP, UDP or SCTP
	Port     uint16
	// Scheduler is the IPVS scheduler's name (rr, wrr, lc, wlc, lblc, lblcr, sh,
	// dh, sed, nq, mh).
	Scheduler string
	Flags     Flags
	// Timeout is the persistence timeout in seconds when Flags has
	// FlagPersistent (session affinity ClientIP); 0 otherwise.
	Timeout uint32
}

// Key identifies a virtual server in the kernel.
type Key struct {
	Address  netip.Addr
	Protocol v1.Protocol
	Port     uint16
}

// Key is vs's identity.
func (vs VirtualServer) Key() Key {
	return Key{Address: vs.Address, Protocol: vs.Protocol, Port: vs.Port}
}

// String is ipvsadm's notation, with the protocol first: "TCP 10.96.0.1:443".
func (k Key) String() string {
	return fmt.Sprintf("%s %s", k.Protocol, netip.AddrPortFrom(k.Address, k.Port))
}

// Flags are the IPVS service flags (IP_VS_SVC_F_*).
type Flags uint32

// The flags kproxy sets or reads.
const (
	// FlagPersistent: connections from one client go to one real server for
	// Timeout seconds (session affinity).
	FlagPersistent Flags = 0x1
	// FlagHashed is set by the kernel on every service it holds.
	FlagHashed Flags = 0x2
	// FlagSchedFlag1/2/3 are the scheduler's own flags (sh: fallback and port;
	// mh: fallback and port).
	FlagSchedFlag1 Flags = 0x8
	FlagSchedFlag2 Flags = 0x10
	FlagSchedFlag3 Flags = 0x20
)

// RealServer is one destination of a virtual server.
type RealServer struct {
	Address netip.Addr
	Port    uint16
	Weight  int
	// ActiveConnections and InactiveConnections are read from the kernel (graceful
	// termination waits for them to reach 0); they are ignored when writing.
	ActiveConnections, InactiveConnections int
}

// AddrPort is rs's address and port.
func (rs RealServer) AddrPort() netip.AddrPort { return netip.AddrPortFrom(rs.Address, rs.Port) }

// Timeouts are IPVS's connection timeouts (ipvsadm --set); 0 leaves one unchanged.
type Timeouts struct {
	TCP, TCPFin, UDP time.Duration
}

// Interface is the boundary to the kernel's IPVS table in one network namespace.
// Every method is one netlink exchange; errors wrap the kernel's.
type Interface interface {
	// VirtualServers lists the kernel's virtual servers of both families.
	VirtualServers() ([]VirtualServer, error)
	AddVirtualServer(vs VirtualServer) error
	// UpdateVirtualServer changes the scheduler, flags or timeout of the virtual
	// server with vs.Key().
	UpdateVirtualServer(vs VirtualServer) error
	DeleteVirtualServer(k Key) error
	// RealServers lists k's real servers; none when k does not exist (the
	// kernel's answer too).
	RealServers(k Key) ([]RealServer, error)
	AddRealServer(k Key, rs RealServer) error
	// UpdateRealServer changes rs's weight.
	UpdateRealServer(k Key, rs RealServer) error
	DeleteRealServer(k Key, rs netip.AddrPort) error
	// Flush deletes every virtual server.
	Flush() error
	SetTimeouts(t Timeouts) error
}
