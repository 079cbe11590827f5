package ipvs

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Fake is an in-memory Interface that behaves as the kernel's table does for
// what kproxy asks of it: adding what exists and deleting or updating what
// does not fail with ErrExists and ErrNotFound, listings are sorted. Tests
// inject errors with SetError and connection counts with SetConnections.
// Fake is safe for concurrent use.
type Fake struct {
	mu       sync.Mutex
	services map[Key]*fakeService
	timeouts Timeouts
	errs     map[string]error
	calls    []string
}

type fakeService struct {
	vs  VirtualServer
	rss map[netip.AddrPort]RealServer
}

var _ Interface = (*Fake)(nil)

// NewFake returns an empty Fake.
func NewFake() *Fake {
	return &Fake{services: map[Key]*fakeService{}, errs: map[string]error{}}
}

// SetError makes every later call of the named method ("AddRealServer",
// "Flush", ...) fail with err, before it changes anything; a nil err clears it.
func (f *Fake) SetError(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.errs, method)
		return
	}
	f.errs[method] = err
}

// SetConnections sets the connection counts of an existing real server, as
// the kernel would report them.
func (f *Fake) SetConnections(k Key, rs netip.AddrPort, active, inactive int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	svc, ok := f.services[k]
	if !ok {
		return fmt.Errorf("IPVS service %s: %w", k, ErrNotFound)
	}
	r, ok := svc.rss[rs]
	if !ok {
		return fmt.Errorf("destination %v of IPVS service %s: %w", rs, k, ErrNotFound)
	}
	r.ActiveConnections, r.InactiveConnections = active, inactive
	svc.rss[rs] = r
	return nil
}

// Calls returns the methods called so far, in order, with their arguments
// ("AddRealServer TCP 10.96.0.1:80 10.0.0.1:8080 weight 1").
func (f *Fake) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// Timeouts returns the timeouts last set, 0 where never set.
func (f *Fake) Timeouts() Timeouts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.timeouts
}

// begin records a call and returns its injected error. f.mu is held.
func (f *Fake) begin(method, args string) error {
	call := method
	if args != "" {
		call += " " + args
	}
	f.calls = append(f.calls, call)
	return f.errs[method]
}

// VirtualServers implements Interface, sorted by address, protocol and port.
func (f *Fake) VirtualServers() ([]VirtualServer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("VirtualServers", ""); err != nil {
		return nil, err
	}
	vss := make([]VirtualServer, 0, len(f.services))
	for _, svc := range f.services {
		vss = append(vss, svc.vs)
	}
	slices.SortFunc(vss, func(a, b VirtualServer) int { return compareKeys(a.Key(), b.Key()) })
	return vss, nil
}

func compareKeys(a, b Key) int {
	return cmp.Or(a.Address.Compare(b.Address), cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port))
}

// AddVirtualServer implements Interface.
func (f *Fake) AddVirtualServer(vs VirtualServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("AddVirtualServer", describeVS(vs)); err != nil {
		return err
	}
	if err := validVS(vs); err != nil {
		return err
	}
	if _, ok := f.services[vs.Key()]; ok {
		return fmt.Errorf("adding IPVS service %s: %w", vs.Key(), ErrExists)
	}
	vs.Flags &^= FlagHashed
	f.services[vs.Key()] = &fakeService{vs: vs, rss: map[netip.AddrPort]RealServer{}}
	return nil
}

// UpdateVirtualServer implements Interface.
func (f *Fake) UpdateVirtualServer(vs VirtualServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("UpdateVirtualServer", describeVS(vs)); err != nil {
		return err
	}
	if err := validVS(vs); err != nil {
		return err
	}
	svc, ok := f.services[vs.Key()]
	if !ok {
		return fmt.Errorf("updating IPVS service %s: %w", vs.Key(), ErrNotFound)
	}
	vs.Flags &^= FlagHashed
	svc.vs = vs
	return nil
}

// DeleteVirtualServer implements Interface.
func (f *Fake) DeleteVirtualServer(k Key) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("DeleteVirtualServer", k.String()); err != nil {
		return err
	}
	if _, ok := f.services[k]; !ok {
		return fmt.Errorf("deleting IPVS service %s: %w", k, ErrNotFound)
	}
	delete(f.services, k)
	return nil
}

// RealServers implements Interface, sorted by address and port; a virtual
// server that does not exist has none, as in the kernel.
func (f *Fake) RealServers(k Key) ([]RealServer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("RealServers", k.String()); err != nil {
		return nil, err
	}
	svc, ok := f.services[k]
	if !ok {
		// The kernel's dump of a missing service's destinations is empty.
		return []RealServer{}, nil
	}
	rss := make([]RealServer, 0, len(svc.rss))
	for _, rs := range svc.rss {
		rss = append(rss, rs)
	}
	slices.SortFunc(rss, func(a, b RealServer) int { return a.AddrPort().Compare(b.AddrPort()) })
	return rss, nil
}

// AddRealServer implements Interface.
func (f *Fake) AddRealServer(k Key, rs RealServer) error {
	return f.destination("AddRealServer", k, rs, func(svc *fakeService, exists bool) error {
		if exists {
			return ErrExists
		}
		svc.rss[rs.AddrPort()] = RealServer{Address: rs.Address, Port: rs.Port, Weight: rs.Weight}
		return nil
	})
}

// UpdateRealServer implements Interface.
func (f *Fake) UpdateRealServer(k Key, rs RealServer) error {
	return f.destination("UpdateRealServer", k, rs, func(svc *fakeService, exists bool) error {
		if !exists {
			return ErrNotFound
		}
		cur := svc.rss[rs.AddrPort()]
		cur.Weight = rs.Weight
		svc.rss[rs.AddrPort()] = cur
		return nil
	})
}

// DeleteRealServer implements Interface.
func (f *Fake) DeleteRealServer(k Key, rs netip.AddrPort) error {
	return f.destination("DeleteRealServer", k, RealServer{Address: rs.Addr(), Port: rs.Port()}, func(svc *fakeService, exists bool) error {
		if !exists {
			return ErrNotFound
		}
		delete(svc.rss, rs)
		return nil
	})
}

func (f *Fake) destination(method string, k Key, rs RealServer, change func(svc *fakeService, exists bool) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	args := fmt.Sprintf("%s %v", k, rs.AddrPort())
	if method != "DeleteRealServer" {
		args += fmt.Sprintf(" weight %d", rs.Weight)
	}
	if err := f.begin(method, args); err != nil {
		return err
	}
	if _, _, err := addressFamily(rs.Address); err != nil {
		return fmt.Errorf("real server %v: %w", rs.AddrPort(), err)
	}
	svc, ok := f.services[k]
	if !ok {
		return fmt.Errorf("%s %v: IPVS service %s: %w", method, rs.AddrPort(), k, ErrNotFound)
	}
	if rs.Address.Is4() != k.Address.Is4() {
		return fmt.Errorf("%s %v: IPVS service %s is of the other family", method, rs.AddrPort(), k)
	}
	_, exists := svc.rss[rs.AddrPort()]
	if err := change(svc, exists); err != nil {
		return fmt.Errorf("%s %v of IPVS service %s: %w", method, rs.AddrPort(), k, err)
	}
	return nil
}

// Flush implements Interface.
func (f *Fake) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("Flush", ""); err != nil {
		return err
	}
	clear(f.services)
	return nil
}

// SetTimeouts implements Interface; a zero timeout leaves the previous one,
// as in the kernel.
func (f *Fake) SetTimeouts(t Timeouts) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("SetTimeouts", fmt.Sprintf("tcp %v tcpfin %v udp %v", t.TCP, t.TCPFin, t.UDP)); err != nil {
		return err
	}
	for _, p := range []struct {
		dst *time.Duration
		v   time.Duration
	}{{&f.timeouts.TCP, t.TCP}, {&f.timeouts.TCPFin, t.TCPFin}, {&f.timeouts.UDP, t.UDP}} {
		if p.v != 0 {
			*p.dst = p.v
		}
	}
	return nil
}

// validVS checks what the kernel would refuse: an unknown protocol, family
// or scheduler (the kernel answers ENOENT for a scheduler it has no module
// for).
func validVS(vs VirtualServer) error {
	if err := checkKey(vs.Key()); err != nil {
		return err
	}
	if !slices.Contains(Schedulers(), vs.Scheduler) {
		return fmt.Errorf("IPVS service %s: scheduler %q: %w", vs.Key(), vs.Scheduler, ErrNotFound)
	}
	return nil
}

func describeVS(vs VirtualServer) string {
	s := fmt.Sprintf("%s %s", vs.Key(), vs.Scheduler)
	if vs.Flags != 0 {
		s += fmt.Sprintf(" flags %#x", uint32(vs.Flags))
	}
	if vs.Timeout != 0 {
		s += fmt.Sprintf(" timeout %d", vs.Timeout)
	}
	return s
}
