package vm

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

// consoleTail keeps the last bytes of the VM's serial console for error messages,
// copying everything to an optional live writer.
type consoleTail struct {
	mu   sync.Mutex
	buf  []byte
	live io.Writer
}

// consoleKeep is how much of the console is kept: the boot of a healthy VM with
// "quiet" prints a few lines; a panic or a failing /init prints a screenful.
const consoleKeep = 16 << 10

func (c *consoleTail) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = append(c.buf, p...)
	if len(c.buf) > consoleKeep {
		c.buf = append([]byte(nil), c.buf[len(c.buf)-consoleKeep:]...)
	}
	if c.live != nil {
		_, _ = c.live.Write(p)
	}
	return len(p), nil
}

// Tail returns the last n lines, without carriage returns.
func (c *consoleTail) Tail(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	lines := strings.Split(strings.TrimRight(string(bytes.ReplaceAll(c.buf, []byte("\r"), nil)), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
