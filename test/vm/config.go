package vm

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Config says how to boot the VM. The zero values of the optional fields are the
// defaults noted on them.
type Config struct {
	// Kernel and Initramfs are the assets of hack/vm-assets.sh (_output/vm/vmlinuz and
	// _output/vm/initramfs.img).
	Kernel, Initramfs string
	// Agent is the host path of a binary that runs Agent when IsAgent (kproxy-vmexec,
	// or a test binary that is its own agent).
	Agent string
	// QEMU is the emulator (default qemu-system-x86_64, from PATH).
	QEMU string
	// MemoryMiB (default 2048) and CPUs (default 2) size the VM.
	MemoryMiB, CPUs int
	// BootTimeout bounds the time from starting qemu to the agent's hello (default
	// 3 minutes: about 10 s is usual under TCG, much more means the VM is stuck).
	BootTimeout time.Duration
	// Timeout, when positive, bounds the payload's run after the hello.
	Timeout time.Duration
	// Net, when set, gives the VM a NIC on a tap device in an existing namespace.
	Net *Network
	// Stdout and Stderr receive the payload's output (default: discarded).
	Stdout, Stderr io.Writer
	// Console, when set, receives the VM's serial console as it comes (the kernel's
	// and /init's lines); its last lines are in every error either way.
	Console io.Writer
	// Signals are delivered to the payload in the VM (go test's SIGQUIT on a timeout
	// then dumps the test's goroutines as it would on the host).
	Signals <-chan os.Signal
}

// Network is the VM's NIC: a tap device that qemu creates inside the network namespace
// Netns (named, as `ip netns` knows it; never the root namespace), with Host's address
// there, and Guest's address on the VM's eth0 (with a default route via Host's
// address). The namespace's processes and the VM reach each other; nothing else is
// reached that the namespace does not route to.
type Network struct {
	Netns       string
	Guest, Host netip.Prefix
}

// ParseNetwork parses KPROXY_VM_NET's "GUEST/LEN,HOST/LEN" for the namespace netns.
func ParseNetwork(netns, s string) (*Network, error) {
	g, h, ok := strings.Cut(s, ",")
	if !ok {
		return nil, fmt.Errorf("network %q: want GUEST/LEN,HOST/LEN", s)
	}
	guest, err := netip.ParsePrefix(strings.TrimSpace(g))
	if err != nil {
		return nil, fmt.Errorf("network %q: the guest address: %w", s, err)
	}
	host, err := netip.ParsePrefix(strings.TrimSpace(h))
	if err != nil {
		return nil, fmt.Errorf("network %q: the host-side address: %w", s, err)
	}
	n := &Network{Netns: netns, Guest: guest, Host: host}
	return n, n.validate()
}

func (n *Network) validate() error {
	switch {
	case n.Netns == "":
		return fmt.Errorf("network %v: no namespace: the tap device is never created in the root namespace", n.Guest)
	case n.Guest.Masked() != n.Host.Masked():
		return fmt.Errorf("network: the guest's %v and the host side's %v are not on one subnet", n.Guest, n.Host)
	case n.Guest.Addr() == n.Host.Addr():
		return fmt.Errorf("network: the guest and the host side both have %v", n.Guest.Addr())
	}
	return nil
}

// ConfigFromEnv is the configuration kproxy-vmexec uses: the assets in
// KPROXY_VM_ASSETS (default: _output/vm of the Go module holding dir), the network of
// KPROXY_VM_NETNS and KPROXY_VM_NET, KPROXY_VM_BOOT_TIMEOUT (a duration).
func ConfigFromEnv(dir string) (Config, error) {
	var c Config
	assets := os.Getenv("KPROXY_VM_ASSETS")
	if assets == "" {
		root, err := ModuleRoot(dir)
		if err != nil {
			return c, err
		}
		if root == "" {
			return c, fmt.Errorf("%s is in no Go module: set KPROXY_VM_ASSETS to the directory of vmlinuz and initramfs.img", dir)
		}
		assets = filepath.Join(root, "_output", "vm")
	}
	c.Kernel = filepath.Join(assets, "vmlinuz")
	c.Initramfs = filepath.Join(assets, "initramfs.img")
	if s := os.Getenv("KPROXY_VM_BOOT_TIMEOUT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return c, fmt.Errorf("KPROXY_VM_BOOT_TIMEOUT: %w", err)
		}
		c.BootTimeout = d
	}
	ns, spec := os.Getenv("KPROXY_VM_NETNS"), os.Getenv("KPROXY_VM_NET")
	if ns != "" || spec != "" {
		n, err := ParseNetwork(ns, spec)
		if err != nil {
			return c, fmt.Errorf("KPROXY_VM_NETNS=%q KPROXY_VM_NET=%q: %w", ns, spec, err)
		}
		c.Net = n
	}
	return c, nil
}

// CheckAssets says what is missing to boot, with the command that builds it.
func (c Config) CheckAssets() error {
	for _, f := range []string{c.Kernel, c.Initramfs} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("the VM's assets are not built (hack/vm-assets.sh, or make vm-assets): %w", err)
		}
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.QEMU == "" {
		c.QEMU = "qemu-system-x86_64"
	}
	if c.MemoryMiB == 0 {
		c.MemoryMiB = 2048
	}
	if c.CPUs == 0 {
		c.CPUs = 2
	}
	if c.BootTimeout == 0 {
		c.BootTimeout = 3 * time.Minute
	}
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	if c.Stderr == nil {
		c.Stderr = io.Discard
	}
	return c
}
