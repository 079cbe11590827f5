package lab

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultPrefix starts the name of every lab namespace.
const DefaultPrefix = "kpl-"

// instanceID names one lab instance: the owning process and a per-process sequence.
func instanceID(prefix string, pid int, seq uint64) string {
	return fmt.Sprintf("%s%d-%d-", prefix, pid, seq)
}

// ownerPID extracts the owning process ID from a namespace name made by instanceID.
func ownerPID(name, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	pidStr, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(pidStr)
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// LeftoverNamespaces picks, from names, the lab namespaces with prefix that no running
// lab owns: their owning process is gone. Names with the prefix but no parseable owner
// are leftovers too (nothing alive can claim them). Namespaces of process self are kept:
// another lab of this process may be running.
func LeftoverNamespaces(names []string, prefix string, self int, alive func(pid int) bool) []string {
	var out []string
	for _, n := range names {
		if !strings.HasPrefix(n, prefix) {
			continue
		}
		pid, ok := ownerPID(n, prefix)
		if ok && (pid == self || alive(pid)) {
			continue
		}
		out = append(out, n)
	}
	return out
}

// parseNetnsList parses `ip netns list` output ("name" or "name (id: N)" per line).
func parseNetnsList(out string) []string {
	var names []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names
}
