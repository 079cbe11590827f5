package bench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

// ProcCPU returns the CPU seconds of pid and its descendants: utime+stime of each
// live process plus cutime+cstime (the children it has already reaped). Upstream
// writes its rules with `nft` child processes; the one of the initial sync may still
// be exiting when the sync is detected, and counting it only once reaped read 1-2 s
// instead of ~20 s in some repetitions.
func ProcCPU(pid int) (float64, error) {
	total, err := statCPU(pid)
	if err != nil {
		return 0, err
	}
	for _, child := range procChildren(pid) {
		// A child that exits meanwhile is skipped (its time is in pid's cutime
		// only once reaped: a window of microseconds).
		if c, err := ProcCPU(child); err == nil {
			total += c
		}
	}
	return total, nil
}

// statCPU returns utime+stime+cutime+cstime of pid in seconds.
func statCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	// Fields after the command: state is field 3; utime..cstime are fields 14..17.
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return 0, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(f))
	}
	var total float64
	for _, k := range []int{11, 12, 13, 14} {
		v, err := strconv.ParseFloat(f[k], 64)
		if err != nil {
			return 0, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
		}
		total += v
	}
	return total / clockTicks, nil
}

// procChildren lists the live children of every thread of pid
// (/proc/<pid>/task/<tid>/children); nil when they cannot be read.
func procChildren(pid int) []int {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if child, err := strconv.Atoi(f); err == nil {
				out = append(out, child)
			}
		}
	}
	return out
}

// ProcPeakRSS returns VmHWM of pid in MiB.
func ProcPeakRSS(pid int) (float64, error) { return procStatusMiB(pid, "VmHWM") }

// ProcRSS returns VmRSS of pid in MiB: what it holds now.
func ProcRSS(pid int) (float64, error) { return procStatusMiB(pid, "VmRSS") }

// procStatusMiB reads the kB field of /proc/<pid>/status, in MiB.
func procStatusMiB(pid int, field string) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0, fmt.Errorf("parse %s %q: %w", field, line, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
