package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Leftovers reports what of this cluster survives Close: network namespaces, cgroups,
// live processes, and mounts in the host's mount namespace that name the cluster's work
// directory or its tmpfs (none should ever be made there). After Close it must be nil.
func (c *Cluster) Leftovers(ctx context.Context) error {
	var errs []error
	if c.ID == "" {
		return nil
	}
	out, err := runHost(ctx, "ip", "netns", "list")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		if name, _, _ := strings.Cut(line, " "); strings.HasPrefix(name, c.ID) {
			errs = append(errs, fmt.Errorf("network namespace %s still exists", name))
		}
	}
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, c.ID)); err == nil {
			errs = append(errs, fmt.Errorf("cgroup %s still exists", filepath.Join(h, c.ID)))
		}
	}
	c.mu.Lock()
	procs := append(c.processes[:0:0], c.processes...)
	c.mu.Unlock()
	for _, p := range procs {
		if done, _ := p.Exited(); !done {
			errs = append(errs, fmt.Errorf("process %s (pid %d) still runs", p.Name, p.Pid()))
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if (c.WorkDir != "" && strings.Contains(line, c.WorkDir)) || strings.Contains(line, "kproxy-cluster-") {
			errs = append(errs, fmt.Errorf("mount in the host's namespace: %s", line))
		}
	}
	return errors.Join(errs...)
}
