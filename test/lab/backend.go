package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	v1 "k8s.io/api/core/v1"
)

// BackendPort is one port a backend serves.
type BackendPort struct {
	Protocol v1.Protocol
	Port     int
}

func (p BackendPort) String() string { return fmt.Sprintf("%s/%d", p.Protocol, p.Port) }

// DefaultBackendPorts are served by every pod unless Options.BackendPorts says otherwise.
var DefaultBackendPorts = []BackendPort{
	{v1.ProtocolTCP, 80}, {v1.ProtocolUDP, 80},
	{v1.ProtocolTCP, 8080}, {v1.ProtocolUDP, 8080},
}

// Server is an in-process backend listening on every address of one namespace, for
// both IP families, answering each TCP connection and UDP datagram with a Reply.
type Server struct {
	Identity string
	NS       *NS
	Port     BackendPort

	closers []interface{ Close() error }
	wg      sync.WaitGroup
	once    sync.Once
}

// Serve starts a backend in ns answering as identity. Prefer Lab.Serve, which also
// stops it at teardown.
func Serve(ctx context.Context, ns *NS, identity string, port BackendPort) (*Server, error) {
	s := &Server{Identity: identity, NS: ns, Port: port}
	for _, fam := range []string{"4", "6"} {
		addr := fmt.Sprintf("0.0.0.0:%d", port.Port)
		if fam == "6" {
			addr = fmt.Sprintf("[::]:%d", port.Port)
		}
		var err error
		switch port.Protocol {
		case v1.ProtocolTCP:
			err = s.serveTCP(ctx, "tcp"+fam, addr)
		case v1.ProtocolUDP:
			err = s.serveUDP(ctx, "udp"+fam, addr)
		default:
			err = fmt.Errorf("unsupported protocol %q", port.Protocol)
		}
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("serve %s in %s: %w", port, ns.Name, err)
		}
	}
	return s, nil
}

// Close stops the server and waits for its goroutines.
func (s *Server) Close() error {
	var errs []error
	s.once.Do(func() {
		for _, c := range s.closers {
			if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
				errs = append(errs, err)
			}
		}
		s.wg.Wait()
	})
	return errors.Join(errs...)
}

func (s *Server) reply(client netip.AddrPort) []byte {
	client = netip.AddrPortFrom(client.Addr().Unmap(), client.Port())
	return []byte(Reply{Pod: s.Identity, Client: client}.String() + "\n")
}

func (s *Server) serveTCP(ctx context.Context, network, addr string) error {
	l, err := s.NS.Listen(ctx, network, addr)
	if err != nil {
		return err
	}
	s.closers = append(s.closers, l)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return // closed
			}
			go func() {
				defer c.Close()
				_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
				_, _ = c.Write(s.reply(c.RemoteAddr().(*net.TCPAddr).AddrPort()))
			}()
		}
	}()
	return nil
}

// serveUDP answers from the address each datagram was sent to (a wildcard socket would
// otherwise pick the source by route, which a connected client rejects).
func (s *Server) serveUDP(ctx context.Context, network, addr string) error {
	pc, err := s.NS.ListenPacket(ctx, network, addr)
	if err != nil {
		return err
	}
	s.closers = append(s.closers, pc)
	type rw interface {
		read(b []byte) (n int, dst net.IP, ifIndex int, src net.Addr, err error)
		write(b []byte, src net.IP, ifIndex int, dst net.Addr) error
	}
	var conn rw
	if network == "udp4" {
		p := ipv4.NewPacketConn(pc)
		if err := p.SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true); err != nil {
			pc.Close()
			return err
		}
		conn = v4conn{p}
	} else {
		p := ipv6.NewPacketConn(pc)
		if err := p.SetControlMessage(ipv6.FlagDst|ipv6.FlagInterface, true); err != nil {
			pc.Close()
			return err
		}
		conn = v6conn{p}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		buf := make([]byte, 64*1024)
		for {
			_, dst, ifIndex, src, err := conn.read(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue // e.g. a queued ICMP error
			}
			ua, ok := src.(*net.UDPAddr)
			if !ok {
				continue
			}
			_ = conn.write(s.reply(ua.AddrPort()), dst, ifIndex, src)
		}
	}()
	return nil
}

type v4conn struct{ p *ipv4.PacketConn }

func (c v4conn) read(b []byte) (int, net.IP, int, net.Addr, error) {
	n, cm, src, err := c.p.ReadFrom(b)
	if cm == nil {
		return n, nil, 0, src, err
	}
	return n, cm.Dst, cm.IfIndex, src, err
}

func (c v4conn) write(b []byte, src net.IP, ifIndex int, dst net.Addr) error {
	_, err := c.p.WriteTo(b, &ipv4.ControlMessage{Src: src}, dst)
	return err
}

type v6conn struct{ p *ipv6.PacketConn }

func (c v6conn) read(b []byte) (int, net.IP, int, net.Addr, error) {
	n, cm, src, err := c.p.ReadFrom(b)
	if cm == nil {
		return n, nil, 0, src, err
	}
	return n, cm.Dst, cm.IfIndex, src, err
}

func (c v6conn) write(b []byte, src net.IP, ifIndex int, dst net.Addr) error {
	// The interface index matters for link-local sources only; the kernel routes the rest.
	cm := &ipv6.ControlMessage{Src: src}
	if src.IsLinkLocalUnicast() {
		cm.IfIndex = ifIndex
	}
	_, err := c.p.WriteTo(b, cm, dst)
	return err
}
