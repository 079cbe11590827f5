package nlfault

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeConn records the calls that reach the socket.
type fakeConn struct {
	calls  []string
	closed int
}

func (f *fakeConn) SendmsgBuffers([][]byte) error { f.calls = append(f.calls, "send"); return nil }
func (f *fakeConn) Recvfrom([]byte, int) (int, error) {
	f.calls = append(f.calls, "recv")
	return 0, unix.EAGAIN
}
func (f *fakeConn) GetsockoptInt(int, int) (int, error) { return 0, nil }
func (f *fakeConn) SetsockoptInt(int, int, int) error   { return nil }
func (f *fakeConn) Close() error                        { f.closed++; return nil }

func msg(typ uint16) [][]byte {
	b := make([]byte, unix.NLMSG_HDRLEN)
	binary.NativeEndian.PutUint32(b, uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	return [][]byte{b}
}

// TestFaultsApplyToTheirCallInOrder: a fault fails only its kind of call, the
// number of times armed, without the call reaching the socket; a recvfrom after
// a batch is a batch's; a Close fault closes the socket once and fails every
// later call with EBADF.
func TestFaultsApplyToTheirCallInOrder(t *testing.T) {
	var in Injector
	in.Arm(Fault{Call: BatchSend, Errno: unix.EINTR, Times: 2})
	in.Arm(Fault{Call: BatchRecv, Close: true})
	fc := &fakeConn{}
	c := in.Wrap(fc)

	if err := c.SendmsgBuffers(msg(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETSET)); err != nil {
		t.Errorf("request sendmsg = %v, want it through", err)
	}
	if _, err := c.Recvfrom(nil, 0); !errors.Is(err, unix.EAGAIN) {
		t.Errorf("request recvfrom = %v, want the socket's EAGAIN", err)
	}
	batch := msg(unix.NFNL_MSG_BATCH_BEGIN)
	for i := range 2 {
		if err := c.SendmsgBuffers(batch); !errors.Is(err, unix.EINTR) {
			t.Errorf("batch sendmsg %d = %v, want EINTR", i, err)
		}
	}
	if err := c.SendmsgBuffers(batch); err != nil {
		t.Errorf("third batch sendmsg = %v, want it through", err)
	}
	if _, err := c.Recvfrom(nil, 0); !errors.Is(err, unix.EBADF) || fc.closed != 1 {
		t.Errorf("batch recvfrom = %v with %d closes, want EBADF after closing once", err, fc.closed)
	}
	if _, err := c.GetsockoptInt(0, 0); !errors.Is(err, unix.EBADF) {
		t.Errorf("getsockopt on the closed socket = %v, want EBADF", err)
	}
	if err := c.Close(); !errors.Is(err, unix.EBADF) || fc.closed != 1 {
		t.Errorf("Close of the closed socket = %v with %d closes, want EBADF and no second close", err, fc.closed)
	}
	if want := []string{"send", "recv", "send"}; !slices.Equal(fc.calls, want) {
		t.Errorf("calls that reached the socket = %v, want %v", fc.calls, want)
	}
	if want := []string{"sendmsg(batch): EINTR", "sendmsg(batch): EINTR", "recvfrom(batch replies): socket closed (EBADF)"}; !slices.Equal(in.Injected(), want) {
		t.Errorf("Injected = %q, want %q", in.Injected(), want)
	}
	if n := in.Pending(); n != 0 {
		t.Errorf("Pending = %d, want 0", n)
	}
}
