package conntrack

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/cpuset"

	"github.com/kproxy/kproxy/internal/sysctl"
)

// SysctlConfig is the conntrack part of the kube-proxy configuration. Zero values
// leave the kernel setting alone.
type SysctlConfig struct {
	// MaxPerCore scales nf_conntrack_max with the number of CPUs; 0 leaves both
	// nf_conntrack_max and the hashsize module parameter alone.
	MaxPerCore int32
	// Min is the floor of the scaled nf_conntrack_max.
	Min int32
	// TCPEstablishedTimeout sets nf_conntrack_tcp_timeout_established.
	TCPEstablishedTimeout time.Duration
	// TCPCloseWaitTimeout sets nf_conntrack_tcp_timeout_close_wait.
	TCPCloseWaitTimeout time.Duration
	// TCPBeLiberal sets nf_conntrack_tcp_be_liberal to 1.
	TCPBeLiberal bool
	// UDPTimeout sets nf_conntrack_udp_timeout.
	UDPTimeout time.Duration
	// UDPStreamTimeout sets nf_conntrack_udp_timeout_stream.
	UDPStreamTimeout time.Duration
}

// SysctlEnv is where ApplySysctls reads and writes.
type SysctlEnv struct {
	Sysctl   sysctl.Interface
	Hashsize sysctl.ModuleParam
	// NumCPU is the host's CPU count (nf_conntrack_max is host-wide).
	NumCPU func() int
}

// HostSysctlEnv returns the real environment: /proc/sys, the nf_conntrack hashsize
// module parameter, and the node's online CPU count.
func HostSysctlEnv() SysctlEnv {
	return SysctlEnv{Sysctl: sysctl.New(), Hashsize: sysctl.ConntrackHashsize(), NumCPU: hostNumCPU}
}

// hostNumCPU counts the node's online CPUs from sysfs rather than runtime.NumCPU,
// which honours the process cpuset and would undersize a host-wide limit.
func hostNumCPU() int {
	if n, err := cpuset.NumCPU(); err == nil && n > 0 {
		return n
	}
	return runtime.NumCPU()
}

// maxConntrackLimit caps the scaled nf_conntrack_max, as kube-proxy does, to bound
// memory use on machines with many cores.
const maxConntrackLimit = 1 << 20

// ConntrackMax returns the nf_conntrack_max the configuration asks for on a machine
// with numCPU CPUs, or 0 to leave it alone.
func ConntrackMax(cfg SysctlConfig, numCPU int) int {
	if cfg.MaxPerCore <= 0 {
		return 0
	}
	scaled := int(cfg.MaxPerCore) * numCPU
	if scaled > maxConntrackLimit {
		return maxConntrackLimit
	}
	if floor := int(cfg.Min); scaled <= floor {
		return floor
	}
	return scaled
}

const netfilterPrefix = "net/netfilter/"

// ApplySysctls applies the configuration with kube-proxy's rules: nf_conntrack_max is
// only raised, hashsize is raised to at least max/4, and a sysctl is written only
// when its value differs. Unlike kube-proxy, which exits on the first failure, every
// setting is attempted and each failure is logged as a warning: a read-only /proc/sys
// (a container without the privilege) must not stop the proxy. The returned error
// joins the failures, for information; callers should not treat it as fatal.
func ApplySysctls(ctx context.Context, env SysctlEnv, cfg SysctlConfig) error {
	logger := klog.FromContext(ctx)
	var errs []error
	fail := func(err error) {
		logger.Info("Warning: could not set conntrack parameter, continuing", "err", err)
		errs = append(errs, err)
	}

	numCPU := 1
	if env.NumCPU != nil {
		numCPU = env.NumCPU()
	}
	if max := ConntrackMax(cfg, numCPU); max > 0 {
		logger.V(3).Info("Computed conntrack max", "maxPerCore", cfg.MaxPerCore, "min", cfg.Min, "numCPU", numCPU, "max", max)
		name := netfilterPrefix + "nf_conntrack_max"
		if cur, err := env.Sysctl.Get(name); err != nil || cur < max {
			logger.Info("Set sysctl", "entry", name, "value", max)
			if err := env.Sysctl.Set(name, max); err != nil {
				fail(fmt.Errorf("setting %s to %d: %w", name, max, err))
			}
		}
		if hashsize, err := env.Hashsize.Get(); err != nil {
			fail(fmt.Errorf("reading conntrack hashsize: %w", err))
		} else if hashsize < max/4 {
			logger.Info("Setting conntrack hashsize", "conntrackHashsize", max/4)
			if err := env.Hashsize.Set(max / 4); err != nil {
				fail(fmt.Errorf("setting conntrack hashsize to %d: %w", max/4, err))
			}
		}
	}

	setInt := func(name string, value int) {
		entry := netfilterPrefix + name
		if cur, err := env.Sysctl.Get(entry); err == nil && cur == value {
			return
		}
		logger.Info("Set sysctl", "entry", entry, "value", value)
		if err := env.Sysctl.Set(entry, value); err != nil {
			fail(fmt.Errorf("setting %s to %d: %w", entry, value, err))
		}
	}
	setSeconds := func(name string, d time.Duration) {
		if d > 0 {
			setInt(name, int(d/time.Second))
		}
	}
	setSeconds("nf_conntrack_tcp_timeout_established", cfg.TCPEstablishedTimeout)
	setSeconds("nf_conntrack_tcp_timeout_close_wait", cfg.TCPCloseWaitTimeout)
	if cfg.TCPBeLiberal {
		setInt("nf_conntrack_tcp_be_liberal", 1)
	}
	setSeconds("nf_conntrack_udp_timeout", cfg.UDPTimeout)
	setSeconds("nf_conntrack_udp_timeout_stream", cfg.UDPStreamTimeout)

	return errors.Join(errs...)
}
