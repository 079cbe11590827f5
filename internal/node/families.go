package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// KernelProbe reports the kernel's IPv6 support.
type KernelProbe interface {
	// IPv6 reports whether the kernel has IPv6 at all (present) and whether it was
	// turned off with net.ipv6.conf.all.disable_ipv6 (disabled).
	IPv6() (present, disabled bool)
}

// ProcProbe implements KernelProbe with /proc/net/if_inet6 and
// /proc/sys/net/ipv6/conf/all/disable_ipv6 under Root ("/proc" when empty).
type ProcProbe struct {
	Root string
}

var _ KernelProbe = ProcProbe{}

// IPv6 implements KernelProbe.
func (p ProcProbe) IPv6() (present, disabled bool) {
	root := p.Root
	if root == "" {
		root = "/proc"
	}
	if _, err := os.Stat(filepath.Join(root, "net", "if_inet6")); err != nil {
		return false, false
	}
	content, err := os.ReadFile(filepath.Join(root, "sys", "net", "ipv6", "conf", "all", "disable_ipv6"))
	// An unreadable switch counts as enabled, as in kube-proxy.
	return true, err == nil && strings.TrimSpace(string(content)) == "1"
}

// FakeProbe is a KernelProbe with fixed answers.
type FakeProbe struct {
	Present, Disabled bool
}

// IPv6 implements KernelProbe.
func (f FakeProbe) IPv6() (present, disabled bool) { return f.Present, f.Disabled }

// Families says which IP families the proxy can serve.
type Families struct {
	IPv4, IPv6 bool
}

// DualStack reports whether both families are supported.
func (f Families) DualStack() bool { return f.IPv4 && f.IPv6 }

// Supports reports whether the family is supported.
func (f Families) Supports(family v1.IPFamily) bool {
	switch family {
	case v1.IPv4Protocol:
		return f.IPv4
	case v1.IPv6Protocol:
		return f.IPv6
	}
	return false
}

// ErrPrimaryFamilyUnsupported is returned by CheckPrimary.
var ErrPrimaryFamilyUnsupported = errors.New("no support for primary IP family")

// CheckPrimary fails when the primary family is unsupported, and otherwise logs
// the mode the proxy runs in, as kube-proxy does at startup.
func (f Families) CheckPrimary(ctx context.Context, primary v1.IPFamily) error {
	if !f.Supports(primary) {
		return fmt.Errorf("%w %q", ErrPrimaryFamilyUnsupported, primary)
	}
	logger := klog.FromContext(ctx)
	if f.DualStack() {
		logger.Info("kube-proxy running in dual-stack mode", "primary ipFamily", primary)
	} else {
		logger.Info("kube-proxy running in single-stack mode", "ipFamily", primary)
	}
	return nil
}

// SupportedFamilies combines what the proxy backend supports (the nftables backend
// supports both families; an iptables-based one only those whose binaries work)
// with the kernel's IPv6 support: IPv6 absent from the kernel or disabled makes the
// proxy single-stack.
func SupportedFamilies(ctx context.Context, probe KernelProbe, backend Families) Families {
	logger := klog.FromContext(ctx)
	f := backend
	present, disabled := probe.IPv6()
	switch {
	case !present:
		logger.Info("No kernel support for family", "ipFamily", v1.IPv6Protocol)
		f.IPv6 = false
	case disabled:
		logger.Info("Kernel support disabled for family", "ipFamily", v1.IPv6Protocol)
		f.IPv6 = false
	}
	return f
}
