package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupMount is where the host's cgroup hierarchies are mounted (v1 controllers and,
// on a hybrid host, the v2 "unified" hierarchy, each in its own directory; or a single
// v2 hierarchy right there).
const cgroupMount = "/sys/fs/cgroup"

// hierarchies are the directories under cgroupMount that are cgroup hierarchies.
func hierarchies() ([]string, error) {
	if _, err := os.Stat(filepath.Join(cgroupMount, "cgroup.controllers")); err == nil {
		return []string{cgroupMount}, nil // pure v2
	}
	entries, err := os.ReadDir(cgroupMount)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		dir := filepath.Join(cgroupMount, e.Name())
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			continue // cpu,cpuacct style symlinks name a hierarchy twice
		}
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil {
			out = append(out, dir)
		}
	}
	return out, nil
}

// cgroupMountScript is the shell lines that mount, over a fresh /sys, the cgroup
// hierarchies the host has mounted under cgroupMount, with the same options (mounting
// a v1 hierarchy again with its controllers gives the same hierarchy).
func cgroupMountScript() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		mnt, fstype := f[4], g[0]
		switch {
		case mnt == cgroupMount && fstype == "tmpfs":
			lines = append([]string{"mount -t tmpfs -o mode=0755 cgroup " + cgroupMount}, lines...)
		case strings.HasPrefix(mnt, cgroupMount) && fstype == "cgroup2":
			lines = append(lines, "mkdir -p "+mnt, "mount -t cgroup2 cgroup2 "+mnt)
		case strings.HasPrefix(mnt, cgroupMount+"/") && fstype == "cgroup":
			var opts []string
			for _, o := range strings.Split(g[2], ",") {
				if o != "rw" && o != "ro" {
					opts = append(opts, o)
				}
			}
			if len(opts) == 1 && strings.HasPrefix(opts[0], "name=") {
				opts = append([]string{"none"}, opts...)
			}
			lines = append(lines, "mkdir -p "+mnt, "mount -t cgroup -o "+strings.Join(opts, ",")+" cgroup "+mnt)
		}
	}
	if len(lines) == 0 {
		return nil, errors.New("no cgroup hierarchy mounted under " + cgroupMount)
	}
	return lines, nil
}

// nodeCgroup is a worker's cgroup path (relative to each hierarchy): the kubelet's
// cgroupRoot, and where the node's daemons run.
func (c *Cluster) nodeCgroup(w *Worker) string { return "/" + c.ID + "/" + w.Name }

// makeCgroup creates rel in every hierarchy (parents first) and records it for
// removal. A new cpuset cgroup gets its parent's cpus and mems, without which no
// process may join it.
func (c *Cluster) makeCgroup(rel string) error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	parts := strings.Split(strings.Trim(rel, "/"), "/")
	for i := range parts {
		sub := "/" + strings.Join(parts[:i+1], "/")
		c.mu.Lock()
		if !contains(c.cgroups, sub) {
			c.cgroups = append(c.cgroups, sub)
		}
		c.mu.Unlock()
		for _, h := range hs {
			dir := filepath.Join(h, sub)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("cgroup %s: %w", dir, err)
			}
			if filepath.Base(h) == "cpuset" {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					v, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
					if err != nil {
						return err
					}
					if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
						return fmt.Errorf("cgroup %s: %s: %w", dir, f, err)
					}
				}
			}
		}
	}
	return nil
}

// joinCgroupArgv wraps argv in a shell that moves the shell into rel in every hierarchy
// and then execs the rest of its arguments, so that a daemon and all it starts are in
// the node's cgroup from their first instruction.
func joinCgroupArgv(rel string, argv ...string) ([]string, error) {
	hs, err := hierarchies()
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, h := range hs {
		dirs = append(dirs, filepath.Join(h, rel, "cgroup.procs"))
	}
	script := `for f in ` + strings.Join(dirs, " ") + `; do echo $$ > "$f" || exit 1; done; exec "$@"`
	return append([]string{"sh", "-c", script, "sh"}, argv...), nil
}

// cgroupPids lists the processes in rel and below, in the first hierarchy that has it.
func cgroupPids(rel string) ([]int, error) {
	hs, err := hierarchies()
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, h := range hs {
		root := filepath.Join(h, rel)
		if _, err := os.Stat(root); err != nil {
			continue
		}
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids, nil
}

// killCgroupTree SIGKILLs every process in rel and below until none is left. A
// container's last process can sit in uninterruptible sleep for seconds while its
// overlay mount is released, hence the bound of a minute.
func killCgroupTree(rel string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		pids, err := cgroupPids(rel)
		if err != nil {
			return err
		}
		pids = without(pids, os.Getpid())
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v in cgroup %s survive SIGKILL", pids, rel)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond) // the kernel reaps asynchronously; bounded by the deadline
	}
}

// removeCgroups removes the recorded cgroups and everything the kubelet and runc made
// below them, deepest first, in every hierarchy.
func removeCgroups(recorded []string) error {
	if len(recorded) == 0 {
		return nil
	}
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, rel := range recorded {
		if strings.Count(rel, "/") != 1 {
			continue // the top-level ones are walked below, children included
		}
		if err := killCgroupTree(rel); err != nil {
			errs = append(errs, err)
		}
		for _, h := range hs {
			errs = append(errs, removeTree(filepath.Join(h, rel)))
		}
	}
	return errors.Join(errs...)
}

// removeTree rmdirs a cgroup directory tree bottom-up (cgroup directories are removed
// with rmdir even though they list files). A cgroup whose last process has just exited
// can be busy for a moment: retried within a bound.
func removeTree(root string) error {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		deadline := time.Now().Add(20 * time.Second)
		for {
			err := syscall.Rmdir(d)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("remove cgroup %s: %w", d, err)
			}
			time.Sleep(50 * time.Millisecond) // an emptied cgroup is released asynchronously; bounded by the deadline
		}
	}
	return nil
}

// removeLeftoverCgroups removes top-level cgroups with prefix whose owning process
// (the pid in the name) is gone: what a killed cluster left.
func removeLeftoverCgroups(prefix string) error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	var stale []string
	for _, h := range hs {
		entries, _ := os.ReadDir(h)
		for _, e := range entries {
			name := e.Name()
			if !e.IsDir() || !strings.HasPrefix(name, prefix) {
				continue
			}
			pidStr, _, _ := strings.Cut(strings.TrimPrefix(name, prefix), "-")
			pid, err := strconv.Atoi(pidStr)
			if err != nil || pid == os.Getpid() || processAlive(pid) {
				continue
			}
			if !contains(stale, "/"+name) {
				stale = append(stale, "/"+name)
			}
		}
	}
	return removeCgroups(stale)
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func without(list []int, x int) []int {
	out := list[:0]
	for _, v := range list {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
