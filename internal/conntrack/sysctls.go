package conntrack

import (
	"context"
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
// when its value differs. As upstream's platformSetup, the first failure stops it and
// is returned: the caller fails the start, since a proxy whose conntrack table is
// smaller, or whose timeouts are other, than configured misbehaves under load without
// saying why. A container without write access to /proc/sys needs the settings it
// cannot apply zeroed (conntrack.maxPerCore: 0 and zero timeouts), as kind does.
func ApplySysctls(ctx context.Context, env SysctlEnv, cfg SysctlConfig) error {
	logger := klog.FromContext(ctx)
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
				return fmt.Errorf("setting %s to %d: %w", name, max, err)
			}
		}
		hashsize, err := env.Hashsize.Get()
		if err != nil {
			return fmt.Errorf("reading conntrack hashsize: %w", err)
		}
		if hashsize < max/4 {
			logger.Info("Setting conntrack hashsize", "conntrackHashsize", max/4)
			if err := env.Hashsize.Set(max / 4); err != nil {
				return fmt.Errorf("setting conntrack hashsize to %d: %w", max/4, err)
			}
		}
	}

	type setting struct {
		name  string
		value int
	}
	var settings []setting
	addSeconds := func(name string, d time.Duration) {
		if d > 0 {
			settings = append(settings, setting{name, int(d / time.Second)})
		}
	}
	addSeconds("nf_conntrack_tcp_timeout_established", cfg.TCPEstablishedTimeout)
	addSeconds("nf_conntrack_tcp_timeout_close_wait", cfg.TCPCloseWaitTimeout)
	if cfg.TCPBeLiberal {
		settings = append(settings, setting{"nf_conntrack_tcp_be_liberal", 1})
	}
	addSeconds("nf_conntrack_udp_timeout", cfg.UDPTimeout)
	addSeconds("nf_conntrack_udp_timeout_stream", cfg.UDPStreamTimeout)
	for _, st := range settings {
		entry := netfilterPrefix + st.name
		if cur, err := env.Sysctl.Get(entry); err == nil && cur == st.value {
			continue
		}
		logger.Info("Set sysctl", "entry", entry, "value", st.value)
		if err := env.Sysctl.Set(entry, st.value); err != nil {
			return fmt.Errorf("setting %s to %d: %w", entry, st.value, err)
		}
	}
	return nil
}
