package vm

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// qemuCommand is the emulator's command: TCG (no KVM here), no default devices (so no
// user-mode network that would reach the host's), the serial console on stdout, the
// frame stream on a virtio-serial port connected to the host's socket, a virtio RNG
// (Go's crypto/rand needs no waiting at boot), and the tap NIC when cfg.Net is set,
// with qemu started inside the namespace (`ip netns exec`: the tap is created where
// qemu runs).
func qemuCommand(cfg Config, initrd, sock, tap string) *exec.Cmd {
	append_ := []string{"console=ttyS0", "quiet", "panic=-1", "rdinit=/init", "mitigations=off", cmdlineFlag}
	args := []string{
		"-accel", "tcg", "-m", strconv.Itoa(cfg.MemoryMiB), "-smp", strconv.Itoa(cfg.CPUs),
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-serial", "stdio", "-monitor", "none",
		"-kernel", cfg.Kernel, "-initrd", initrd,
		"-chardev", "socket,id=kproxy,path=" + sock,
		"-device", "virtio-serial-pci,id=vser",
		"-device", "virtserialport,bus=vser.0,chardev=kproxy,name=" + portName,
		"-device", "virtio-rng-pci",
	}
	name, pre := cfg.QEMU, []string(nil)
	if n := cfg.Net; n != nil {
		append_ = append(append_, fmt.Sprintf("kproxy.net=%s,%s", n.Guest, n.Host.Addr()))
		args = append(args,
			"-netdev", "tap,id=net0,ifname="+tap+",script=no,downscript=no",
			"-device", "virtio-net-pci,netdev=net0,mac=52:54:00:4b:50:01")
		name, pre = "ip", []string{"netns", "exec", n.Netns, cfg.QEMU}
	}
	args = append(args, "-append", strings.Join(append_, " "))
	cmd := exec.Command(name, append(pre, args...)...)
	// Its own process group (a terminal's Ctrl-C reaches the wrapper, which kills
	// the group); Run starts it with childproc, which has the kernel kill it if the
	// wrapper dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// killGroup kills qemu's process group (qemu, and `ip netns exec` before it execs).
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
