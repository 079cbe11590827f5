package differential

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kproxy/kproxy/test/lab"
)

// The conntrack table size is host-wide: nf_conntrack_max is read-only outside the
// initial namespace (a write fails, harmlessly), but the nf_conntrack hashsize
// module parameter is writable from any namespace and would resize the host's
// table. Both proxies raise hashsize to max/4 when it is smaller, so a lab case
// whose effective configuration asks for more than 4×hashsize is not run.
const (
	hashsizePath   = "/sys/module/nf_conntrack/parameters/hashsize"
	cpuOnlinePath  = "/sys/devices/system/cpu/online"
	conntrackLimit = 1 << 20 // both proxies cap the scaled maximum here
)

// conntrackGuard returns an error when running args in the lab could resize the
// host's conntrack hash table. The effective configuration is upstream's own: what
// --write-config-to writes for the same arguments (which exits before touching
// anything, or fails validation, in which case no proxy gets as far as the sysctls).
func conntrackGuard(ctx context.Context, ns *lab.NS, up Binary, args []string, dir string) error {
	out := filepath.Join(dir, "effective.yaml")
	r, err := runIn(ctx, ns, up, append(append([]string(nil), args...), "--write-config-to="+out), out)
	if err != nil {
		return err
	}
	if !r.WroteConfig {
		return nil
	}
	var cfg struct {
		Conntrack struct {
			MaxPerCore *int64 `json:"maxPerCore"`
			Min        *int64 `json:"min"`
		} `json:"conntrack"`
	}
	if err := yaml.Unmarshal(r.Written, &cfg); err != nil {
		return fmt.Errorf("upstream's effective configuration: %w", err)
	}
	var perCore, floor int64
	if cfg.Conntrack.MaxPerCore != nil {
		perCore = *cfg.Conntrack.MaxPerCore
	}
	if cfg.Conntrack.Min != nil {
		floor = *cfg.Conntrack.Min
	}
	want := conntrackMax(perCore, floor, int64(onlineCPUs()))
	if want == 0 {
		return nil
	}
	hashsize, err := readInt(hashsizePath)
	if err != nil {
		return fmt.Errorf("the configuration sizes the conntrack table (max %d) and the host's hashsize is unknown: %w", want, err)
	}
	if want/4 > hashsize {
		return fmt.Errorf("the configuration asks for nf_conntrack_max %d: a proxy would raise the host-wide conntrack hashsize from %d to %d", want, hashsize, want/4)
	}
	return nil
}

// conntrackMax is kube-proxy's nf_conntrack_max for a configuration: 0 (leave it)
// without maxPerCore, else maxPerCore×CPUs capped at 1Mi, at least min.
func conntrackMax(perCore, floor, cpus int64) int64 {
	if perCore <= 0 {
		return 0
	}
	scaled := perCore * cpus
	if scaled > conntrackLimit {
		return conntrackLimit
	}
	return max(scaled, floor)
}

// onlineCPUs counts the host's online CPUs ("0-3,5"), as both proxies do (the
// table is host-wide, so not the process's cpuset).
func onlineCPUs() int {
	b, err := os.ReadFile(cpuOnlinePath)
	if err != nil {
		return runtime.NumCPU()
	}
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		z := a
		var err2 error
		if isRange {
			z, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil {
			return runtime.NumCPU()
		}
		n += z - a + 1
	}
	if n <= 0 {
		return runtime.NumCPU()
	}
	return n
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, errors.New(path + ": " + err.Error())
	}
	return v, nil
}
