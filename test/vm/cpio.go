package vm

import (
	"fmt"
	"io"
	"path"
	"strings"
)

// The newc ("070701") format the kernel unpacks into its initramfs. The kernel does
// not create missing parent directories, so cpioWriter emits every parent before its
// children, once.

const (
	modeDir     = 0o040000
	modeFile    = 0o100000
	modeSymlink = 0o120000
)

// cpioWriter writes a newc archive of files owned by root.
type cpioWriter struct {
	w    io.Writer
	n    int64 // bytes written, for the 4-byte padding
	ino  uint32
	dirs map[string]bool
}

func newCPIOWriter(w io.Writer) *cpioWriter {
	return &cpioWriter{w: w, dirs: map[string]bool{"/": true, ".": true}}
}

// Dir adds the directory name (absolute) and its missing parents.
func (c *cpioWriter) Dir(name string) error {
	name = path.Clean(name)
	if c.dirs[name] {
		return nil
	}
	if err := c.Dir(path.Dir(name)); err != nil {
		return err
	}
	c.dirs[name] = true
	return c.header(name, modeDir|0o755, 0)
}

// File adds a regular file of size bytes read from r, with its parents.
func (c *cpioWriter) File(name string, perm uint32, size int64, r io.Reader) error {
	name = path.Clean(name)
	if err := c.Dir(path.Dir(name)); err != nil {
		return err
	}
	if err := c.header(name, modeFile|perm&0o7777, size); err != nil {
		return err
	}
	n, err := io.CopyN(c.w, r, size)
	c.n += n
	if err != nil {
		return fmt.Errorf("cpio: copying %s: %w", name, err)
	}
	return c.pad()
}

// Symlink adds name pointing at target, with its parents.
func (c *cpioWriter) Symlink(name, target string) error {
	name = path.Clean(name)
	if err := c.Dir(path.Dir(name)); err != nil {
		return err
	}
	if err := c.header(name, modeSymlink|0o777, int64(len(target))); err != nil {
		return err
	}
	if err := c.write([]byte(target)); err != nil {
		return err
	}
	return c.pad()
}

// Close writes the trailer. It does not close the underlying writer.
func (c *cpioWriter) Close() error {
	return c.header("TRAILER!!!", 0, 0)
}

func (c *cpioWriter) header(name string, mode uint32, size int64) error {
	// Names in the archive are relative to the root, as cpio writes them.
	rel := strings.TrimPrefix(name, "/")
	c.ino++
	nlink := 1
	if mode&modeDir != 0 {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(rel)+1, 0)
	if err := c.write([]byte(hdr + rel + "\x00")); err != nil {
		return err
	}
	return c.pad()
}

func (c *cpioWriter) write(b []byte) error {
	n, err := c.w.Write(b)
	c.n += int64(n)
	if err != nil {
		return fmt.Errorf("cpio: %w", err)
	}
	return nil
}

func (c *cpioWriter) pad() error {
	if r := c.n % 4; r != 0 {
		return c.write(make([]byte, 4-r))
	}
	return nil
}
