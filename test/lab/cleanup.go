package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// listNamespaces returns the names of all named network namespaces.
func listNamespaces(ctx context.Context) ([]string, error) {
	out, err := runCmd(ctx, nil, "ip", "netns", "list")
	if err != nil {
		return nil, err
	}
	return parseNetnsList(out), nil
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// keptMarker in a work directory protects it from leftover cleanup.
const keptMarker = "KEPT"

// workDirPattern is the os.MkdirTemp pattern of the work directories owned by pid.
func workDirPattern(pid int) string { return fmt.Sprintf("kproxy-lab-%d-", pid) }

// RemoveLeftovers deletes lab namespaces with prefix whose owning process is gone
// (after killing whatever still runs in them) and returns their names. Temporary work
// directories of dead labs go too, unless they were kept on purpose.
func RemoveLeftovers(ctx context.Context, prefix string) ([]string, error) {
	names, err := listNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	stale := LeftoverNamespaces(names, prefix, os.Getpid(), processAlive)
	var errs []error
	for _, n := range stale {
		errs = append(errs, deleteNamespace(ctx, n))
	}
	removeWorkDirs(func(pid int) bool { return pid != os.Getpid() && !processAlive(pid) })
	return stale, errors.Join(errs...)
}

// removeWorkDirs removes temporary lab work directories whose owner matches and that
// are not marked kept. Best effort: these are only temporary files.
func removeWorkDirs(owner func(pid int) bool) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "kproxy-lab-*-*"))
	for _, d := range dirs {
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(d), "kproxy-lab-%d-", &pid); err != nil || !owner(pid) {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, keptMarker)); err == nil {
			continue
		}
		_ = os.RemoveAll(d)
	}
}

// DeleteNamespace kills every process in the named namespace, then deletes it; a
// namespace that is already gone is not an error.
func DeleteNamespace(ctx context.Context, name string) error { return deleteNamespace(ctx, name) }

// deleteNamespace kills every process in the namespace, then deletes it.
func deleteNamespace(ctx context.Context, name string) error {
	if err := killNamespacePids(ctx, name); err != nil {
		return err
	}
	if _, err := runCmd(ctx, nil, "ip", "netns", "del", name); err != nil {
		if names, lerr := listNamespaces(ctx); lerr == nil && !contains(names, name) {
			return nil // already gone
		}
		return err
	}
	return nil
}

func killNamespacePids(ctx context.Context, name string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := runCmd(ctx, nil, "ip", "netns", "pids", name)
		if err != nil {
			return nil // namespace gone or unreadable: nothing to kill
		}
		var pids []int
		for _, f := range strings.Fields(out) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				pids = append(pids, pid)
			}
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v in netns %s survive SIGKILL", pids, name)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond) // let the kernel reap before listing again
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Leftovers reports what of this lab survives: its namespaces and live processes.
// After Close it must return nil.
func (l *Lab) Leftovers(ctx context.Context) error {
	var errs []error
	if l.ID != "" {
		names, err := listNamespaces(ctx)
		if err != nil {
			return err
		}
		for _, n := range names {
			if strings.HasPrefix(n, l.ID) {
				errs = append(errs, fmt.Errorf("namespace %s still exists", n))
			}
		}
	}
	l.mu.Lock()
	procs := append([]*Process(nil), l.processes...)
	l.mu.Unlock()
	for _, p := range procs {
		if done, _ := p.Exited(); !done {
			errs = append(errs, fmt.Errorf("process %s (pid %d) still runs", p.Name, p.Pid()))
		}
	}
	return errors.Join(errs...)
}
