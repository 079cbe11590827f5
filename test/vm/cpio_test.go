package vm

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// readNewc lists an archive's entries (name, mode, data) as the kernel reads them:
// headers and data each padded to 4 bytes, ending at the trailer.
func readNewc(t *testing.T, b []byte) (names []string, modes []uint64, data []string) {
	t.Helper()
	off := 0
	align := func() { off = (off + 3) &^ 3 }
	for {
		if off+110 > len(b) || string(b[off:off+6]) != "070701" {
			t.Fatalf("no header at %d", off)
		}
		field := func(i int) uint64 {
			v, err := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		mode, size, namesize := field(1), int(field(6)), int(field(11))
		name := string(b[off+110 : off+110+namesize-1])
		off += 110 + namesize
		align()
		if name == "TRAILER!!!" {
			return
		}
		names, modes, data = append(names, name), append(modes, mode), append(data, string(b[off:off+size]))
		off += size
		align()
	}
}

func TestCPIOWriterParentsFirst(t *testing.T) {
	var buf bytes.Buffer
	c := newCPIOWriter(&buf)
	for _, err := range []error{
		c.File("/a/b/c.txt", 0o644, 5, strings.NewReader("hello")),
		c.Symlink("/a/link", "b/c.txt"),
		c.File("/a/b/d", 0o755, 0, strings.NewReader("")),
		c.Dir("/a/b"),
		c.Close(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	names, modes, data := readNewc(t, buf.Bytes())
	want := []string{"a", "a/b", "a/b/c.txt", "a/link", "a/b/d"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("entries %q, want %q (parents first, once)", names, want)
	}
	if modes[0] != modeDir|0o755 || modes[2] != modeFile|0o644 || modes[3]&modeSymlink != modeSymlink {
		t.Errorf("modes %o", modes)
	}
	if data[2] != "hello" || data[3] != "b/c.txt" {
		t.Errorf("data %q", data)
	}
}

func TestUsrPath(t *testing.T) {
	for in, want := range map[string]string{
		"/lib/x86_64-linux-gnu/libc.so.6":     "/usr/lib/x86_64-linux-gnu/libc.so.6",
		"/lib64/ld-linux-x86-64.so.2":         "/usr/lib64/ld-linux-x86-64.so.2",
		"/usr/lib/x86_64-linux-gnu/libm.so.6": "/usr/lib/x86_64-linux-gnu/libm.so.6",
	} {
		if got := usrPath(in); got != want {
			t.Errorf("usrPath(%q) = %q, want %q", in, got, want)
		}
	}
}
