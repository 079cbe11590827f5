package ipvs

import (
	"context"
	"fmt"
	"strings"

	utilexec "k8s.io/utils/exec"
)

// LoadModule loads the ip_vs module with `modprobe -va ip_vs`, the command
// moby/ipvs runs for upstream on its first handle. Netlink itself never does
// (see its open), so that a cleanup or another mode never loads IPVS; the
// ipvs mode calls LoadModule before CanUse to start on a node where ip_vs is
// not loaded yet, as upstream does. A failure is returned for the caller to
// log: a kernel with ip_vs built in, or a container without modprobe, may
// still have IPVS, which CanUse then finds out.
func LoadModule(ctx context.Context, exec utilexec.Interface) error {
	out, err := exec.CommandContext(ctx, "modprobe", "-va", "ip_vs").CombinedOutput()
	if err != nil {
		return fmt.Errorf("modprobe -va ip_vs: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
