package vm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// Payload is what one VM runs.
type Payload struct {
	// Binary is the host path of the program run in the VM (as root); its shared
	// libraries (ldd) are packed too.
	Binary string
	// Args are its arguments, after argv[0].
	Args []string
	// Dir is its working directory, the same path in the VM as on the host. It is
	// created in the VM, and every testdata directory of the Go module holding it is
	// packed at its host path (tests read ../other/testdata too); nothing else of the
	// tree is, and what the payload writes there stays in the VM.
	Dir string
	// Env is its environment besides the VM's PATH, HOME, TMPDIR and KPROXY_VM=1
	// ("NAME=value").
	Env []string
	// Files are more host files to pack, each at its guest path.
	Files []File
}

// File is a host file packed into the VM at Guest (absolute).
type File struct {
	Host, Guest string
}

// Paths in the per-run archive; /init runs AgentPath.
const (
	// AgentPath is where the agent runs in the VM (see IsAgent).
	AgentPath  = "/kproxy/agent"
	specPath   = "/kproxy/spec.json"
	payloadDir = "/kproxy/bin"
	// portName is the virtio-serial port of the frame stream.
	portName = "org.kproxy.vm.0"
)

// spec tells the agent what to run; it travels as JSON in the archive.
type spec struct {
	Args []string // argv, argv[0] the payload's path in the VM
	Dir  string
	Env  []string
	Port string
}

// writeRunArchive writes the per-run archive: the agent, the payload with its
// libraries, the spec, the module's testdata and the extra files.
func writeRunArchive(w io.Writer, agent string, p Payload) error {
	c := newCPIOWriter(w)
	bin := path.Join(payloadDir, filepath.Base(p.Binary))
	same, err := sameFile(agent, p.Binary)
	if err != nil {
		return err
	}
	if err := addHostFile(c, p.Binary, bin); err != nil {
		return err
	}
	if same {
		// One copy: the agent is the payload binary run under another name.
		err = c.Symlink(AgentPath, bin)
	} else {
		err = addHostFile(c, agent, AgentPath)
	}
	if err != nil {
		return err
	}
	libs, err := sharedLibraries(p.Binary)
	if err != nil {
		return err
	}
	for _, lib := range libs {
		if err := addHostFile(c, lib, usrPath(lib)); err != nil {
			return err
		}
	}
	s := spec{Args: append([]string{bin}, p.Args...), Dir: p.Dir, Env: p.Env, Port: portName}
	js, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encoding the payload's spec: %w", err)
	}
	if err := c.File(specPath, 0o644, int64(len(js)), bytes.NewReader(js)); err != nil {
		return err
	}
	if p.Dir != "" {
		if err := c.Dir(p.Dir); err != nil {
			return err
		}
		if err := addTestdata(c, p.Dir); err != nil {
			return err
		}
	}
	for _, f := range p.Files {
		if !path.IsAbs(f.Guest) {
			return fmt.Errorf("extra file %s: the guest path %q is not absolute", f.Host, f.Guest)
		}
		if err := addHostFile(c, f.Host, f.Guest); err != nil {
			return err
		}
	}
	return c.Close()
}

func addHostFile(c *cpioWriter, host, guest string) error {
	f, err := os.Open(host)
	if err != nil {
		return fmt.Errorf("packing %s: %w", host, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("packing %s: %w", host, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("packing %s: not a regular file", host)
	}
	return c.File(guest, uint32(st.Mode().Perm()), st.Size(), f)
}

func sameFile(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, fmt.Errorf("the agent: %w", err)
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, fmt.Errorf("the payload: %w", err)
	}
	return os.SameFile(sa, sb), nil
}

// sharedLibraries lists what ldd says bin loads; none for a static binary. The base
// initramfs holds the host's C library already (the host is Debian 12 as the VM's
// tools are); packing a dynamically linked payload's own libraries keeps it runnable
// whatever it links.
func sharedLibraries(bin string) ([]string, error) {
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "not a dynamic executable") {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %w: %s", bin, err, out)
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 3 && fields[1] == "=>" && path.IsAbs(fields[2]):
			libs = append(libs, fields[2])
		case len(fields) >= 1 && path.IsAbs(fields[0]):
			libs = append(libs, fields[0])
		}
	}
	return libs, nil
}

// usrPath maps /lib, /lib64, /bin and /sbin paths to /usr (the VM's merged /usr, as
// hack/vm-assets.sh builds it: the top-level ones are symbolic links there, and an
// archive entry must not replace them).
func usrPath(p string) string {
	for _, top := range []string{"/lib/", "/lib64/", "/bin/", "/sbin/"} {
		if strings.HasPrefix(p, top) {
			return "/usr" + p
		}
	}
	return p
}

// addTestdata packs every testdata directory of the Go module holding dir (found by
// its go.mod), skipping what the go command skips: directories starting with "." or
// "_" (so _output too).
func addTestdata(c *cpioWriter, dir string) error {
	root, err := ModuleRoot(dir)
	if err != nil || root == "" {
		return err
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if name != "testdata" {
			return nil
		}
		if err := addTree(c, p); err != nil {
			return err
		}
		return filepath.SkipDir
	})
}

// addTree packs the files, directories and symbolic links under dir.
func addTree(c *cpioWriter, dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return c.Dir(p)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("packing %s: %w", p, err)
			}
			return c.Symlink(p, target)
		case d.Type().IsRegular():
			return addHostFile(c, p, p)
		}
		return nil
	})
}

// ModuleRoot is the nearest directory at or above dir with a go.mod, or "".
func ModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("finding the module of %s: %w", dir, err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", nil
		}
		dir = parent
	}
}
