package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"

	libipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/kproxy/kproxy/internal/nlhandle"
)

// genlFamily is the generic netlink family of the kernel's IPVS interface
// (IPVS_GENL_NAME in include/uapi/linux/ip_vs.h).
const genlFamily = "IPVS"

// Netlink implements Interface over generic netlink with moby/ipvs, in one
// network namespace. The netlink socket is opened on first use, not by New;
// Netlink is safe for concurrent use (calls are serialised: moby/ipvs's
// handle shares one socket between requests).
type Netlink struct {
	nsPath string

	mu     sync.Mutex
	handle *libipvs.Handle
}

var _ Interface = (*Netlink)(nil)

// New returns an Interface for the network namespace at nsPath (such as
// /run/netns/NAME or /proc/PID/ns/net), or the caller's when nsPath is "".
// It does no I/O.
func New(nsPath string) *Netlink { return &Netlink{nsPath: nsPath} }

// Close closes the netlink socket, if one was opened. A later call opens a
// new one.
func (n *Netlink) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.handle != nil {
		n.handle.Close()
		n.handle = nil
	}
	return nil
}

// Available reports, without changing anything, whether the kernel has IPVS
// (nil), has not (an error wrapping ErrUnavailable), or could not be asked.
func (n *Netlink) Available() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, err := n.open()
	return err
}

// open returns the handle, opening it on first use. n.mu is held.
//
// moby/ipvs runs `modprobe -va ip_vs` and resolves the IPVS family once per
// process, on its first handle; when the family does not exist, every later
// request of the process is silently ignored by the kernel (moby/ipvs issue
// 27, which upstream works around in CanUseIPVSProxier). So the family is
// resolved here first, in the target namespace: without it, open reports
// ErrUnavailable and moby/ipvs is never asked, which also means that kproxy
// itself never loads ip_vs through moby/ipvs.
func (n *Netlink) open() (*libipvs.Handle, error) {
	if n.handle != nil {
		return n.handle, nil
	}
	if err := n.checkFamily(); err != nil {
		return nil, err
	}
	h, err := libipvs.New(n.nsPath)
	if err != nil {
		return nil, fmt.Errorf("opening IPVS netlink socket in %s: %w", nlhandle.Where(n.nsPath), err)
	}
	n.handle = h
	return h, nil
}

func (n *Netlink) checkFamily() error {
	h, err := nlhandle.Open(n.nsPath, unix.NETLINK_GENERIC)
	if err != nil {
		return err
	}
	defer h.Close()
	if _, err := h.GenlFamilyGet(genlFamily); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%w: generic netlink family %q not registered", ErrUnavailable, genlFamily)
		}
		return fmt.Errorf("resolving generic netlink family %q in %s: %w", genlFamily, nlhandle.Where(n.nsPath), err)
	}
	return nil
}

// do runs f with the handle, serialised.
func (n *Netlink) do(f func(h *libipvs.Handle) error) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	h, err := n.open()
	if err != nil {
		return err
	}
	return f(h)
}

// kernelError wraps a failed request's error with what was asked, and with
// ErrNotFound or ErrExists when the kernel's errno means that.
func kernelError(what string, err error) error {
	switch {
	case errors.Is(err, unix.ESRCH), errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%s: %w: %w", what, ErrNotFound, err)
	case errors.Is(err, unix.EEXIST):
		return fmt.Errorf("%s: %w: %w", what, ErrExists, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// VirtualServers implements Interface. Firewall-mark services are left out
// (see fromService).
func (n *Netlink) VirtualServers() ([]VirtualServer, error) {
	var svcs []*libipvs.Service
	err := n.do(func(h *libipvs.Handle) (err error) {
		svcs, err = h.GetServices()
		return err
	})
	if err != nil {
		return nil, kernelError("listing IPVS services", err)
	}
	vss := make([]VirtualServer, 0, len(svcs))
	for _, svc := range svcs {
		vs, ok, err := fromService(svc)
		if err != nil {
			return nil, err
		}
		if ok {
			vss = append(vss, vs)
		}
	}
	return vss, nil
}

// AddVirtualServer implements Interface.
func (n *Netlink) AddVirtualServer(vs VirtualServer) error {
	return n.serviceCmd("adding", vs, (*libipvs.Handle).NewService)
}

// UpdateVirtualServer implements Interface.
func (n *Netlink) UpdateVirtualServer(vs VirtualServer) error {
	return n.serviceCmd("updating", vs, (*libipvs.Handle).UpdateService)
}

func (n *Netlink) serviceCmd(verb string, vs VirtualServer, cmd func(*libipvs.Handle, *libipvs.Service) error) error {
	svc, err := toService(vs)
	if err != nil {
		return err
	}
	if err := n.do(func(h *libipvs.Handle) error { return cmd(h, svc) }); err != nil {
		return kernelError(fmt.Sprintf("%s IPVS service %s (scheduler %q)", verb, vs.Key(), vs.Scheduler), err)
	}
	return nil
}

// DeleteVirtualServer implements Interface.
func (n *Netlink) DeleteVirtualServer(k Key) error {
	svc, err := keyService(k)
	if err != nil {
		return err
	}
	if err := n.do(func(h *libipvs.Handle) error { return h.DelService(svc) }); err != nil {
		return kernelError(fmt.Sprintf("deleting IPVS service %s", k), err)
	}
	return nil
}

// RealServers implements Interface.
func (n *Netlink) RealServers(k Key) ([]RealServer, error) {
	svc, err := keyService(k)
	if err != nil {
		return nil, err
	}
	var dsts []*libipvs.Destination
	err = n.do(func(h *libipvs.Handle) (err error) {
		dsts, err = h.GetDestinations(svc)
		return err
	})
	if err != nil {
		return nil, kernelError(fmt.Sprintf("listing the destinations of IPVS service %s", k), err)
	}
	rss := make([]RealServer, 0, len(dsts))
	for _, d := range dsts {
		rs, err := fromDestination(d, svc.AddressFamily)
		if err != nil {
			return nil, fmt.Errorf("IPVS service %s: %w", k, err)
		}
		rss = append(rss, rs)
	}
	return rss, nil
}

// AddRealServer implements Interface.
func (n *Netlink) AddRealServer(k Key, rs RealServer) error {
	return n.destinationCmd("adding", k, rs, (*libipvs.Handle).NewDestination)
}

// UpdateRealServer implements Interface.
func (n *Netlink) UpdateRealServer(k Key, rs RealServer) error {
	return n.destinationCmd("updating", k, rs, (*libipvs.Handle).UpdateDestination)
}

// DeleteRealServer implements Interface.
func (n *Netlink) DeleteRealServer(k Key, rs netip.AddrPort) error {
	return n.destinationCmd("deleting", k, RealServer{Address: rs.Addr(), Port: rs.Port()}, (*libipvs.Handle).DelDestination)
}

func (n *Netlink) destinationCmd(verb string, k Key, rs RealServer, cmd func(*libipvs.Handle, *libipvs.Service, *libipvs.Destination) error) error {
	svc, err := keyService(k)
	if err != nil {
		return err
	}
	dst, err := toDestination(rs)
	if err != nil {
		return fmt.Errorf("IPVS service %s: %w", k, err)
	}
	if err := n.do(func(h *libipvs.Handle) error { return cmd(h, svc, dst) }); err != nil {
		return kernelError(fmt.Sprintf("%s destination %v of IPVS service %s", verb, rs.AddrPort(), k), err)
	}
	return nil
}

// Flush implements Interface.
func (n *Netlink) Flush() error {
	if err := n.do(func(h *libipvs.Handle) error { return h.Flush() }); err != nil {
		return kernelError("flushing IPVS services", err)
	}
	return nil
}

// SetTimeouts implements Interface.
func (n *Netlink) SetTimeouts(t Timeouts) error {
	cfg := &libipvs.Config{TimeoutTCP: t.TCP, TimeoutTCPFin: t.TCPFin, TimeoutUDP: t.UDP}
	if err := n.do(func(h *libipvs.Handle) error { return h.SetConfig(cfg) }); err != nil {
		return kernelError(fmt.Sprintf("setting IPVS timeouts (tcp %v, tcpfin %v, udp %v)", t.TCP, t.TCPFin, t.UDP), err)
	}
	return nil
}

// Timeouts reads IPVS's connection timeouts (ipvsadm --list --timeout).
func (n *Netlink) Timeouts() (Timeouts, error) {
	var cfg *libipvs.Config
	err := n.do(func(h *libipvs.Handle) (err error) {
		cfg, err = h.GetConfig()
		return err
	})
	if err != nil {
		return Timeouts{}, kernelError("reading IPVS timeouts", err)
	}
	return Timeouts{TCP: cfg.TimeoutTCP, TCPFin: cfg.TimeoutTCPFin, UDP: cfg.TimeoutUDP}, nil
}
