package nftnetlink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"syscall"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Conn is the system calls one netfilter netlink socket makes: everything the
// executor does with a socket goes through it, so that a test can wrap it
// (Options.WrapConn) and make a call fail with the errno the kernel would return
// (internal/nftnetlink/nlfault), on a real socket in a real kernel.
type Conn interface {
	// SendmsgBuffers writes the concatenation of bufs to the kernel in one
	// sendmsg(2).
	SendmsgBuffers(bufs [][]byte) error
	// Recvfrom reads one datagram into buf (recvfrom(2) with flags) and returns
	// its length.
	Recvfrom(buf []byte, flags int) (int, error)
	// GetsockoptInt and SetsockoptInt are getsockopt(2) and setsockopt(2) of an
	// int option.
	GetsockoptInt(level, opt int) (int, error)
	SetsockoptInt(level, opt, value int) error
	// Close closes the socket.
	Close() error
}

// SocketError is the failure of a system call on a netlink socket, as opposed to
// the kernel's refusal of a batch it received (an error reply, carrying the
// failing command): the socket could not be opened, or a request or its replies
// could not be sent or read. Its message is "netlink <call>: <errno>".
type SocketError struct {
	// Call names the system call ("sendmsg (N bytes)", "recv", ...).
	Call string
	Err  error
}

func (e *SocketError) Error() string { return "netlink " + e.Call + ": " + e.Err.Error() }

func (e *SocketError) Unwrap() error { return e.Err }

// IsSocketError reports whether err is, or wraps, a SocketError: the sync did not
// fail because the kernel refused its batch.
func IsSocketError(err error) bool {
	var se *SocketError
	return errors.As(err, &se)
}

// fdConn is the real Conn: a socket's file descriptor.
type fdConn int

func (fd fdConn) SendmsgBuffers(bufs [][]byte) error {
	_, err := unix.SendmsgBuffers(int(fd), bufs, nil, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}, 0)
	return err
}

func (fd fdConn) Recvfrom(buf []byte, flags int) (int, error) {
	n, _, err := unix.Recvfrom(int(fd), buf, flags)
	return n, err
}

func (fd fdConn) GetsockoptInt(level, opt int) (int, error) {
	return unix.GetsockoptInt(int(fd), level, opt)
}

func (fd fdConn) SetsockoptInt(level, opt, value int) error {
	return unix.SetsockoptInt(int(fd), level, opt, value)
}

func (fd fdConn) Close() error { return unix.Close(int(fd)) }

// socket is one NETLINK_NETFILTER socket, opened for one Run (or one listing):
// no socket outlives the operation it was opened for, so a socket that failed
// never serves the retry.
type socket struct {
	conn Conn
	// rbuf is the receive buffer, reused by every recv.
	rbuf []byte
}

// openSocket opens the executor's socket (see openSocketIn), wrapped by
// Options.WrapConn when set.
func (e *Executor) openSocket() (*socket, error) {
	s, err := openSocketIn(e.opts.NetNSPath)
	if err != nil {
		return nil, err
	}
	if e.opts.WrapConn != nil {
		s.conn = e.opts.WrapConn(s.conn)
	}
	return s, nil
}

// openSocketIn opens a netfilter netlink socket, in the network namespace at nsPath
// when it is set (the socket stays bound to that namespace after the thread
// returns to its own).
func openSocketIn(nsPath string) (*socket, error) {
	if nsPath == "" {
		return newSocket()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("current network namespace: %w", err)
	}
	defer orig.Close()
	target, err := netns.GetFromPath(nsPath)
	if err != nil {
		return nil, fmt.Errorf("network namespace %s: %w", nsPath, err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		return nil, fmt.Errorf("enter network namespace %s: %w", nsPath, err)
	}
	s, sockErr := newSocket()
	if err := netns.Set(orig); err != nil {
		// The thread is in the wrong namespace: keep it locked so the runtime
		// discards it instead of reusing it (LockOSThread without Unlock).
		runtime.LockOSThread()
		if s != nil {
			s.close()
		}
		return nil, fmt.Errorf("return to network namespace: %w", err)
	}
	return s, sockErr
}

func newSocket() (*socket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, &SocketError{Call: "socket", Err: err}
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, &SocketError{Call: "bind", Err: err}
	}
	// Error replies for a large failed batch must fit (one per failed message).
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
	// Extended acks would echo only the header of failed messages.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	return &socket{conn: fdConn(fd)}, nil
}

// close closes the socket; its error is of no use (the socket is not reused, and
// a netlink socket has nothing to flush).
func (s *socket) close() { _ = s.conn.Close() }

// send writes buf in one sendmsg: the kernel handles a netlink message to itself
// synchronously, so when send returns the batch has been committed or aborted and
// any error replies are queued on the socket.
func (s *socket) send(buf []byte) error { return s.sendBuffers([][]byte{buf}) }

// sendBuffers writes the concatenation of bufs in one sendmsg (gathered by the
// kernel into one skb, as an nfnetlink batch must arrive). When it fails, the
// kernel did not receive the message: sendmsg to a kernel netlink socket either
// delivers the whole skb, which the kernel then processes before sendmsg
// returns, or fails before (EINTR, retried here, ENOBUFS/ENOMEM allocating it,
// EBADF, ...).
func (s *socket) sendBuffers(bufs [][]byte) error {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	// A batch must arrive in one skb, which the send buffer bounds.
	if cur, err := s.conn.GetsockoptInt(unix.SOL_SOCKET, unix.SO_SNDBUF); err == nil && cur/2 < n+4096 {
		if err := s.conn.SetsockoptInt(unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, n+4096); err != nil {
			return &SocketError{Call: fmt.Sprintf("send buffer of %d bytes", n), Err: err}
		}
	}
	for {
		err := s.conn.SendmsgBuffers(bufs)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return &SocketError{Call: fmt.Sprintf("sendmsg (%d bytes)", n), Err: err}
		}
		return nil
	}
}

// nlReply is one message received from the kernel.
type nlReply struct {
	typ   uint16
	flags uint16
	seq   uint32
	data  []byte // after the netlink header
}

// errno returns the sequence number of the request an NLMSG_ERROR reply answers and
// its error (nil for an ack).
func (r nlReply) errno() (uint32, error) {
	if len(r.data) < 4+unix.NLMSG_HDRLEN {
		return r.seq, errors.New("short netlink error message")
	}
	code := int32(binary.NativeEndian.Uint32(r.data))
	seq := binary.NativeEndian.Uint32(r.data[4+8:])
	if code == 0 {
		return seq, nil
	}
	return seq, syscall.Errno(-code)
}

// recv reads the replies of one datagram; with wait false it returns (nil, nil)
// when nothing is queued.
//
// The replies' data are in the socket's receive buffer, which the next recv
// overwrites: a caller keeps nothing of them past its loop iteration (a dump of a
// large table is thousands of datagrams).
func (s *socket) recv(wait bool) ([]nlReply, error) {
	if s.rbuf == nil {
		s.rbuf = make([]byte, 1<<16)
	}
	buf := s.rbuf
	flags := 0
	if !wait {
		flags = unix.MSG_DONTWAIT
	}
	for {
		n, err := s.conn.Recvfrom(buf, flags)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			return nil, nil
		}
		if err != nil {
			return nil, &SocketError{Call: "recv", Err: err}
		}
		return parseReplies(buf[:n])
	}
}

func parseReplies(b []byte) ([]nlReply, error) {
	var out []nlReply
	for len(b) >= unix.NLMSG_HDRLEN {
		l := int(binary.NativeEndian.Uint32(b))
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return out, fmt.Errorf("malformed netlink reply")
		}
		out = append(out, nlReply{
			typ:   binary.NativeEndian.Uint16(b[4:]),
			flags: binary.NativeEndian.Uint16(b[6:]),
			seq:   binary.NativeEndian.Uint32(b[8:]),
			data:  b[unix.NLMSG_HDRLEN:l],
		})
		l = (l + 3) &^ 3
		if l > len(b) {
			break
		}
		b = b[l:]
	}
	return out, nil
}

// attrs decodes a flat list of netlink attributes (type without flags -> value).
func attrs(b []byte) map[uint16][]byte {
	m := map[uint16][]byte{}
	for len(b) >= nlaHdrLen {
		l := int(binary.NativeEndian.Uint16(b))
		t := binary.NativeEndian.Uint16(b[2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
		if l < nlaHdrLen || l > len(b) {
			break
		}
		m[t] = b[nlaHdrLen:l]
		l = (l + 3) &^ 3
		if l > len(b) {
			break
		}
		b = b[l:]
	}
	return m
}
