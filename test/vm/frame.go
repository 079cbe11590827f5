package vm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// The channel between the host and the agent is one virtio-serial port carrying
// frames: a kind byte, a big-endian uint32 length, then the payload. One ordered
// stream keeps the payload's stdout and stderr apart without reordering them against
// each other more than the payload's own writes do, and leaves the serial console to
// the kernel and /init.

// Frame kinds.
const (
	frameHello  byte = 'H' // guest: the agent is up (payload: the kernel release)
	frameStdout byte = 'O' // guest: bytes the payload wrote to stdout
	frameStderr byte = 'E' // guest: bytes the payload wrote to stderr
	frameExit   byte = 'X' // guest: the payload ended (payload: int32 exit code)
	frameSignal byte = 'S' // host: deliver this signal (payload: one byte) to the payload
	frameAck    byte = 'A' // host: the exit frame arrived; the agent may stop
)

// maxFrame bounds one frame's payload: writes are split into frames of this size.
const maxFrame = 32 << 10

type frame struct {
	kind byte
	data []byte
}

// frameWriter writes frames to one stream; it is safe for concurrent use (stdout and
// stderr are copied by two goroutines).
type frameWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (f *frameWriter) send(kind byte, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		chunk := data
		if len(chunk) > maxFrame {
			chunk = chunk[:maxFrame]
		}
		var hdr [5]byte
		hdr[0] = kind
		binary.BigEndian.PutUint32(hdr[1:], uint32(len(chunk)))
		if _, err := f.w.Write(append(hdr[:], chunk...)); err != nil {
			return fmt.Errorf("writing a %q frame: %w", kind, err)
		}
		data = data[len(chunk):]
		if len(data) == 0 {
			return nil
		}
	}
}

// streamWriter is an io.Writer whose writes become frames of one kind.
type streamWriter struct {
	f    *frameWriter
	kind byte
}

func (s streamWriter) Write(p []byte) (int, error) {
	if err := s.f.send(s.kind, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// readFrame reads one frame. io.EOF means the stream ended between frames.
func readFrame(r io.Reader) (frame, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return frame{}, fmt.Errorf("a frame header cut short: %w", err)
		}
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return frame{}, fmt.Errorf("a %q frame of %d bytes (at most %d): the stream is out of step", hdr[0], n, maxFrame)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		return frame{}, fmt.Errorf("a %q frame of %d bytes cut short: %w", hdr[0], n, err)
	}
	return frame{kind: hdr[0], data: data}, nil
}

func exitPayload(code int) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(int32(code)))
}

func exitCode(data []byte) (int, error) {
	if len(data) != 4 {
		return 0, fmt.Errorf("an exit frame of %d bytes, want 4", len(data))
	}
	return int(int32(binary.BigEndian.Uint32(data))), nil
}
