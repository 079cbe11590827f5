package cluster

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"
)

// Options configure a cluster. The zero value of every field but BinDir and ImageDir
// has a default.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
	// kubelet and kubectl (hack/build-tools.sh).
	BinDir string
	// ImageDir holds the docker-archives and their index.txt (hack/cluster-images.sh).
	ImageDir string
	// DeployDir holds kube-proxy.yaml and kube-proxy-config.yaml (the repository's deploy/).
	DeployDir string
	// Workers is the number of worker nodes (default 3).
	Workers int
	// Prefix of namespace and cgroup names (default "kpc-").
	Prefix string
	// WorkDir is created when empty (under os.TempDir) and removed at Close unless kept.
	WorkDir string
	// ReadyTimeout bounds each wait of Start (default 2 minutes).
	ReadyTimeout time.Duration
	// Log receives progress lines (default: discarded).
	Log func(format string, args ...any)
}

func (o Options) withDefaults() (Options, error) {
	if o.BinDir == "" || o.ImageDir == "" || o.DeployDir == "" {
		return o, errors.New("cluster: BinDir, ImageDir and DeployDir are required")
	}
	for _, p := range []*string{&o.BinDir, &o.ImageDir, &o.DeployDir} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return o, err
		}
		*p = abs
	}
	if o.Workers == 0 {
		o.Workers = 3
	}
	if o.Workers < 1 || o.Workers > 9 {
		return o, fmt.Errorf("cluster: %d workers: between 1 and 9", o.Workers)
	}
	if o.Prefix == "" {
		o.Prefix = "kpc-"
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	return o, nil
}

// Binaries the cluster runs from BinDir.
var requiredBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl"}

// Host programs the cluster runs.
var requiredHostPrograms = []string{"containerd", "runc", "ctr", "ip", "nsenter", "unshare", "mount"}

// cniPluginDir is where Debian's containernetworking-plugins installs ptp, host-local
// and loopback.
const cniPluginDir = "/usr/lib/cni"

// Preflight says what is missing to start a cluster with opts, before anything is built.
func Preflight(opts Options) error {
	o, err := opts.withDefaults()
	if err != nil {
		return err
	}
	var errs []error
	if os.Geteuid() != 0 {
		errs = append(errs, errors.New("must run as root (network namespaces, mounts, cgroups)"))
	}
	for _, b := range requiredBinaries {
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w (hack/build-tools.sh builds it)", b, err))
		}
	}
	for _, p := range []string{"ptp", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniPluginDir, p)); err != nil {
			errs = append(errs, fmt.Errorf("CNI plugin %s: %w (Debian package containernetworking-plugins)", p, err))
		}
	}
	for _, p := range requiredHostPrograms {
		if _, err := lookPath(p); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := os.Stat(filepath.Join(o.ImageDir, "index.txt")); err != nil {
		errs = append(errs, fmt.Errorf("images: %w (hack/cluster-images.sh builds them)", err))
	}
	return errors.Join(errs...)
}

// Addressing of the cluster (see the package doc).
var (
	NodeSubnetV4     = netip.MustParsePrefix("192.0.2.0/24")
	NodeSubnetV6     = netip.MustParsePrefix("2001:db8:1::/64")
	PodCIDRV4        = netip.MustParsePrefix("10.244.0.0/16")
	PodCIDRV6        = netip.MustParsePrefix("fd00:10:244::/56")
	ServiceCIDRV4    = netip.MustParsePrefix("10.96.0.0/16")
	ServiceCIDRV6    = netip.MustParsePrefix("fd00:10:96::/112")
	ClusterDNS       = netip.MustParseAddr("10.96.0.10")
	APIServiceV4     = netip.MustParseAddr("10.96.0.1")
	APIServiceV6     = netip.MustParseAddr("fd00:10:96::1")
	ClusterDomain    = "cluster.local"
	APIServerPort    = 6443
	controlPlaneHost = 10
	clientHost       = 100
)

// memberAddrs are a member's addresses on the node network: host number h in both
// subnets (192.0.2.h, 2001:db8:1::h in hex digits that read as h).
func memberAddrs(h int) (netip.Addr, netip.Addr) {
	v4 := NodeSubnetV4.Addr().As4()
	v4[3] = byte(h)
	v6 := netip.MustParseAddr(fmt.Sprintf("2001:db8:1::%d", h))
	return netip.AddrFrom4(v4), v6
}
