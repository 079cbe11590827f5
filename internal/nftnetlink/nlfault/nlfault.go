// Package nlfault makes the system calls of kproxy's netfilter netlink sockets
// fail the way the kernel makes them fail, for tests of what the nftables
// writer (internal/nftnetlink) and the dataplane above it do about it, on a real
// socket in a real kernel: set nftnetlink.Options.WrapConn to a function calling
// Injector.Wrap, then Arm faults.
//
// A fault replaces one kind of call (the sendmsg carrying a batch, the recvfrom
// reading a batch's replies, or the same of another request: a dump, the set
// type lookup) with the errno it names, without making the call: what a process
// sees when the kernel returns that errno (ENOBUFS, EAGAIN, EINTR, ...). A Close
// fault closes the socket first; that call and every later one on the socket
// fail with EBADF, as calls on a closed descriptor do (the descriptor's number is
// never used again, since another socket may have been given it).
//
// It is test support: nothing in the daemon imports it. It does not import
// nftnetlink either (whose internal tests use it); Conn has nftnetlink.Conn's
// method set.
package nlfault

import (
	"encoding/binary"
	"fmt"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Conn is the system calls of one netlink socket: the same method set as
// nftnetlink.Conn, which nftnetlink's values satisfy. It is declared again, not
// imported, because nftnetlink's own in-package tests import this package.
type Conn interface {
	SendmsgBuffers(bufs [][]byte) error
	Recvfrom(buf []byte, flags int) (int, error)
	GetsockoptInt(level, opt int) (int, error)
	SetsockoptInt(level, opt, value int) error
	Close() error
}

// Call is a kind of system call on a socket.
type Call int

const (
	// BatchSend is the sendmsg carrying an nfnetlink batch (a transaction).
	BatchSend Call = iota
	// BatchRecv is a recvfrom on a socket that sent a batch: reading the
	// batch's error replies.
	BatchRecv
	// RequestSend is the sendmsg of any other request (a dump, the type of a
	// set the batch adds elements to).
	RequestSend
	// RequestRecv is a recvfrom reading such a request's replies.
	RequestRecv
)

func (c Call) String() string {
	switch c {
	case BatchSend:
		return "sendmsg(batch)"
	case BatchRecv:
		return "recvfrom(batch replies)"
	case RequestSend:
		return "sendmsg(request)"
	case RequestRecv:
		return "recvfrom(request replies)"
	}
	return fmt.Sprintf("Call(%d)", int(c))
}

// Fault makes calls of one kind fail.
type Fault struct {
	Call Call
	// Errno is what the call returns (it is not made).
	Errno syscall.Errno
	// Close closes the socket instead: the call, and every later call on the
	// socket, fails with EBADF. Errno is then ignored.
	Close bool
	// Times is how many calls fail (0 means 1).
	Times int
}

func (f Fault) String() string {
	if f.Close {
		return f.Call.String() + ": socket closed (EBADF)"
	}
	return fmt.Sprintf("%s: %s", f.Call, unix.ErrnoName(f.Errno))
}

// Injector holds armed faults; it wraps any number of sockets (each Run of the
// writer opens its own), and the faults apply to the calls of all of them in
// order. It is safe for concurrent use.
type Injector struct {
	mu       sync.Mutex
	armed    []*armed
	injected []string
}

type armed struct {
	Fault
	left int
}

// Arm adds f; faults of the same Call apply in the order armed.
func (in *Injector) Arm(f Fault) {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := f.Times
	if n <= 0 {
		n = 1
	}
	in.armed = append(in.armed, &armed{Fault: f, left: n})
}

// Disarm drops the faults that have not been injected yet.
func (in *Injector) Disarm() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.armed = nil
}

// Pending is how many armed calls have not failed yet.
func (in *Injector) Pending() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := 0
	for _, a := range in.armed {
		n += a.left
	}
	return n
}

// Injected lists the faults injected so far, one per failed call, in order.
func (in *Injector) Injected() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.injected...)
}

// take returns the armed fault for call, if any, and counts it as injected.
func (in *Injector) take(call Call) (Fault, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for i, a := range in.armed {
		if a.Call != call {
			continue
		}
		a.left--
		if a.left == 0 {
			in.armed = append(in.armed[:i], in.armed[i+1:]...)
		}
		in.injected = append(in.injected, a.String())
		return a.Fault, true
	}
	return Fault{}, false
}

// Wrap returns c with the injector's faults.
func (in *Injector) Wrap(c Conn) Conn { return &conn{in: in, inner: c} }

// conn is one wrapped socket. A socket is used by one goroutine at a time (the
// writer's Run), so its own fields need no lock.
type conn struct {
	in        *Injector
	inner     Conn
	sentBatch bool
	closed    bool
}

// fault fails the call when a fault is armed for it (or the socket was closed).
func (c *conn) fault(call Call) error {
	if c.closed {
		return unix.EBADF
	}
	f, ok := c.in.take(call)
	if !ok {
		return nil
	}
	if f.Close {
		c.closed = true
		_ = c.inner.Close()
		return unix.EBADF
	}
	return f.Errno
}

// isBatch reports whether the message starts an nfnetlink batch.
func isBatch(bufs [][]byte) bool {
	return len(bufs) > 0 && len(bufs[0]) >= unix.NLMSG_HDRLEN &&
		binary.NativeEndian.Uint16(bufs[0][4:]) == unix.NFNL_MSG_BATCH_BEGIN
}

func (c *conn) SendmsgBuffers(bufs [][]byte) error {
	call := RequestSend
	if isBatch(bufs) {
		call = BatchSend
	}
	if err := c.fault(call); err != nil {
		return err
	}
	err := c.inner.SendmsgBuffers(bufs)
	if err == nil && call == BatchSend {
		c.sentBatch = true
	}
	return err
}

func (c *conn) Recvfrom(buf []byte, flags int) (int, error) {
	call := RequestRecv
	if c.sentBatch {
		call = BatchRecv
	}
	if err := c.fault(call); err != nil {
		return 0, err
	}
	return c.inner.Recvfrom(buf, flags)
}

func (c *conn) GetsockoptInt(level, opt int) (int, error) {
	if c.closed {
		return 0, unix.EBADF
	}
	return c.inner.GetsockoptInt(level, opt)
}

func (c *conn) SetsockoptInt(level, opt, value int) error {
	if c.closed {
		return unix.EBADF
	}
	return c.inner.SetsockoptInt(level, opt, value)
}

func (c *conn) Close() error {
	if c.closed {
		return unix.EBADF
	}
	c.closed = true
	return c.inner.Close()
}
