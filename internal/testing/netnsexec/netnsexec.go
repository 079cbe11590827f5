// Package netnsexec runs commands inside one network namespace, for the kernel
// tests of packages that drive host tools (iptables, ipset, ...) through
// k8s.io/utils/exec: every command goes through "ip netns exec", so nothing
// touches the host's namespace.
package netnsexec

import (
	"context"

	utilexec "k8s.io/utils/exec"
)

// Exec is a utilexec.Interface whose commands run in the network namespace NS
// (a name under /var/run/netns) through Host (utilexec.New() when nil).
type Exec struct {
	NS   string
	Host utilexec.Interface
}

var _ utilexec.Interface = Exec{}

func (e Exec) host() utilexec.Interface {
	if e.Host == nil {
		return utilexec.New()
	}
	return e.Host
}

// Command implements utilexec.Interface.
func (e Exec) Command(cmd string, args ...string) utilexec.Cmd {
	return e.host().Command("ip", append([]string{"netns", "exec", e.NS, cmd}, args...)...)
}

// CommandContext implements utilexec.Interface.
func (e Exec) CommandContext(ctx context.Context, cmd string, args ...string) utilexec.Cmd {
	return e.host().CommandContext(ctx, "ip", append([]string{"netns", "exec", e.NS, cmd}, args...)...)
}

// LookPath implements utilexec.Interface: binaries are the host's.
func (e Exec) LookPath(file string) (string, error) { return e.host().LookPath(file) }
