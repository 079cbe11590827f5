package sysctl

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Interface reads and writes integer sysctls.
type Interface interface {
	// Get returns the current value of the sysctl.
	Get(name string) (int, error)
	// Set writes the sysctl.
	Set(name string, value int) error
}

// DefaultRoot is where the kernel exposes sysctls.
const DefaultRoot = "/proc/sys"

// Proc implements Interface with the files under Root (DefaultRoot when empty).
type Proc struct {
	Root string
}

// New returns the /proc/sys implementation.
func New() *Proc { return &Proc{Root: DefaultRoot} }

var _ Interface = (*Proc)(nil)

func (p *Proc) path(name string) string {
	root := p.Root
	if root == "" {
		root = DefaultRoot
	}
	return filepath.Join(root, NormalizeName(name))
}

// Get reads the sysctl as a decimal integer.
func (p *Proc) Get(name string) (int, error) {
	return readIntFile(p.path(name))
}

// Set writes the sysctl as a decimal integer.
func (p *Proc) Set(name string, value int) error {
	return writeIntFile(p.path(name), value)
}

// NormalizeName turns "net.ipv4.ip_forward" into "net/ipv4/ip_forward". A name that
// already contains a slash is returned unchanged (a dotted component such as an
// interface name "eth0.100" is then preserved, as the kernel's sysctl(8) does).
func NormalizeName(name string) string {
	if strings.Contains(name, "/") {
		return name
	}
	return strings.ReplaceAll(name, ".", "/")
}

func readIntFile(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return -1, fmt.Errorf("reading %s: %w", path, err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return -1, fmt.Errorf("parsing %s: %w", path, err)
	}
	return v, nil
}

func writeIntFile(path string, value int) error {
	// O_WRONLY without O_CREATE: a missing sysctl is an error, never a new file.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := f.WriteString(strconv.Itoa(value)); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
