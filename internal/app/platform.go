package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/klog/v2"
	utilexec "k8s.io/utils/exec"

	"github.com/kproxy/kproxy/internal/config"
	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/node"
)

// defaultModeMessage is upstream's error line and KubeProxyDefaultMode Event when no
// mode was chosen (upstream records the Event before its broadcaster starts, so it
// never reaches the API server; kproxy delivers it).
const defaultModeMessage = "No kube-proxy mode specified: defaulting to 'iptables'. Note that in Kubernetes 1.40 the default mode will switch to 'nftables'. If you wish to continue using 'iptables' mode, you must explicitly specify 'mode: iptables' in the kube-proxy config file, or '--proxy-mode iptables' on the kube-proxy command line."

// nftablesRecommendation is kproxy's own advice next to upstream's default-mode line:
// the blank mode keeps meaning iptables, as upstream, but nftables is the mode kproxy
// is built around.
const nftablesRecommendation = "kproxy recommends nftables mode: same Service behaviour, syncs in milliseconds at scale, and no iptables-nft translation; set 'mode: nftables' (and nodePortAddresses, which defaults to the node's primary IPs there) to switch"

// Kernel requirement of nftables mode, as upstream's: kernel 5.13 implies a distro nft
// of 1.0.1 or later, so that kube-proxy's rules cannot break the host's own nft
// (kubernetes#122743). The environment variable skips the check, as upstream.
const (
	nftablesMinKernel          = "5.13"
	nftablesSkipKernelCheckEnv = "KUBE_PROXY_NFTABLES_SKIP_KERNEL_VERSION_CHECK"
	kernelReleaseFile          = "/proc/sys/kernel/osrelease"
)

// checkNFTablesKernel refuses kernels older than nftablesMinKernel unless the skip
// variable is set. getenv and readFile are os.Getenv and os.ReadFile in production.
func checkNFTablesKernel(getenv func(string) string, readFile func(string) ([]byte, error)) error {
	if getenv(nftablesSkipKernelCheckEnv) != "" {
		return nil
	}
	content, err := readFile(kernelReleaseFile)
	if err != nil {
		return fmt.Errorf("could not check kernel version: failed to read os-release file: %w", err)
	}
	kernel, err := version.ParseGeneric(strings.TrimSpace(string(content)))
	if err != nil {
		return fmt.Errorf("could not check kernel version: failed to parse kernel version: %w", err)
	}
	if kernel.LessThan(version.MustParseGeneric(nftablesMinKernel)) {
		return fmt.Errorf("kube-proxy in nftables mode requires kernel %s or later", nftablesMinKernel)
	}
	return nil
}

// iptablesFamilies is what an iptables-based mode supports, as upstream's
// platformCheckSupported: the families whose iptables binaries work. One missing
// family makes the proxy single-stack with a log line; both missing fail the start.
func iptablesFamilies(ctx context.Context, present func(v1.IPFamily) bool) (node.Families, error) {
	logger := klog.FromContext(ctx)
	f := node.Families{IPv4: present(v1.IPv4Protocol), IPv6: present(v1.IPv6Protocol)}
	switch {
	case !f.IPv4 && !f.IPv6:
		return f, errors.New("iptables is not available on this host: neither iptables nor ip6tables can list the nat table")
	case !f.IPv4:
		logger.Info("No iptables support for family", "ipFamily", v1.IPv4Protocol)
	case !f.IPv6:
		logger.Info("No iptables support for family", "ipFamily", v1.IPv6Protocol)
	}
	return f, nil
}

// backendFamilies returns the families the configured mode's backend supports (the
// nft command always handles both; iptables only those whose binaries work), before
// the kernel's IPv6 support is taken into account, and in iptables mode the usable
// iptables of each supported family (the host's backend, detected once), which the
// family proxiers then use.
func backendFamilies(ctx context.Context, mode config.ProxyMode) (node.Families, map[v1.IPFamily]*iptables.Exec, error) {
	if mode != config.ProxyModeIPTables && mode != config.ProxyModeIPVS {
		return node.Families{IPv4: true, IPv6: true}, nil, nil
	}
	exec := utilexec.New()
	backend := iptables.DetectBackend(ctx, exec)
	usable := map[v1.IPFamily]*iptables.Exec{}
	f, err := iptablesFamilies(ctx, func(family v1.IPFamily) bool {
		ipt := iptables.New(exec, family, backend)
		if !ipt.Present(ctx) {
			return false
		}
		usable[family] = ipt
		return true
	})
	return f, usable, err
}

// platformChecks are the mode's start-up checks that need no API object.
func platformChecks(mode config.ProxyMode) error {
	if mode == config.ProxyModeNFTables {
		return checkNFTablesKernel(os.Getenv, os.ReadFile)
	}
	return nil
}
