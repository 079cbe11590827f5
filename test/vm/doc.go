// Package vm runs a program, typically a Go test binary, as root in a throw-away
// qemu VM with Debian 12's kernel (6.1, with ip_vs and every netfilter module), so
// that kernel tests run on a kernel other than the host's. kproxy-vmexec
// (test/vm/cmd/kproxy-vmexec) is its `go test -exec` front end; docs/vm.md says how to
// use it.
//
// Contract:
//   - The assets are hack/vm-assets.sh's: the kernel (_output/vm/vmlinuz) and a base
//     initramfs (_output/vm/initramfs.img) with busybox, the kernel modules and the
//     host's ip, nft, iptables (both back ends), ipset, conntrack, nfacct, unshare,
//     sysctl and kmod, and an /init (hack/vm/init) that mounts /proc, /sys, /dev and
//     /run (not /tmp: the initramfs's own is writable, and a checkout under /tmp must
//     stay visible; one under /run cannot be used), loads the modules, sets lo up, runs /kproxy/agent if present, prints
//     its exit code on the console and powers off.
//   - Config.Run appends a per-run archive to the base: the agent (Config.Agent: a
//     binary that calls Agent when IsAgent, such as kproxy-vmexec itself), the payload
//     binary with its shared libraries, every testdata directory of the payload's Go
//     module at its host path, the extra Files, and a spec (argv, working directory,
//     environment). Nothing else of the host is visible in the VM, and nothing the
//     payload writes comes back, except its output.
//   - qemu runs under TCG (no KVM here) with no default devices: the serial console is
//     the kernel's and /init's, and the payload's stdout and stderr come back apart,
//     in order, as frames on a virtio-serial port, followed by its exit code. Signals
//     in Config.Signals are delivered to the payload.
//   - Run returns the payload's exit code, or an error with the console's last lines
//     when there is none: no hello from the agent within Config.BootTimeout, the
//     payload overran Config.Timeout, the VM stopped, or the context ended. qemu is in
//     its own process group, killed on every return path (and by the kernel if the
//     caller dies: Pdeathsig, tied by internal/testing/childproc to a thread that
//     outlives qemu, not to whichever thread happened to fork it); the run's temporary directory is removed as soon as the
//     VM is up, and on every return path.
//   - With Config.Net, qemu runs inside the named network namespace and creates its tap
//     device there (never in the root namespace); the tap gets the host side's
//     address and goes away with qemu; the VM's eth0 gets the guest's, with a default
//     route via the host side's.
//   - InVM reports whether the process runs in such a VM (the kernel's command line
//     says kproxy.vm=1); tests need nothing else to run there.
package vm
