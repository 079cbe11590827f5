package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"
)

// waitArgs bound the wait for the xtables lock of every iptables command, as
// upstream does: give up after 5 seconds instead of blocking forever (or, in
// iptables without -w, failing at once).
var waitArgs = []string{"-w", "5"}

// restoreWaitArgs are waitArgs plus the lock poll interval in microseconds
// that earlier upstream releases passed to iptables-restore (100 ms instead of
// the default 1 s; v1.37 passes -w 5 only). iptables 1.8.8 and later ignore it
// with a warning.
var restoreWaitArgs = []string{"-w", "5", "-W", "100000"}

// maxRuleCopies bounds the loop deleting duplicated rules.
const maxRuleCopies = 16

// exitStatusResourceProblem is iptables' exit status when it could not try
// the request at all, for example after waiting for the xtables lock.
const exitStatusResourceProblem = 4

// Exec implements Interface by running the iptables binaries of one family
// and backend through an exec.Interface (so tests can fake or re-target it,
// for example into a network namespace).
type Exec struct {
	exec    utilexec.Interface
	family  v1.IPFamily
	backend Backend
}

var _ Interface = (*Exec)(nil)

// New returns the iptables of one family and backend. It runs nothing.
func New(exec utilexec.Interface, family v1.IPFamily, backend Backend) *Exec {
	return &Exec{exec: exec, family: family, backend: backend}
}

// Family implements Interface.
func (e *Exec) Family() v1.IPFamily { return e.family }

// Backend reports the backend e was created for.
func (e *Exec) Backend() Backend { return e.backend }

// binary returns the command for tool ("", "-save" or "-restore").
func (e *Exec) binary(tool string) string {
	return binaryName(e.exec, e.family, e.backend, tool)
}

// binaryName is the backend-specific name (iptables-nft-restore) when it is
// installed, the plain name (iptables-restore) otherwise.
func binaryName(exec utilexec.Interface, family v1.IPFamily, backend Backend, tool string) string {
	base := "iptables"
	if family == v1.IPv6Protocol {
		base = "ip6tables"
	}
	if backend == BackendNFT || backend == BackendLegacy {
		name := base + "-" + string(backend) + tool
		if _, err := exec.LookPath(name); err == nil {
			return name
		}
	}
	return base + tool
}

// run runs "iptables -w 5 op chain -t table args...", returning its
// combined output.
func (e *Exec) run(ctx context.Context, op string, table Table, chain Chain, args ...string) ([]byte, error) {
	full := make([]string, 0, len(waitArgs)+4+len(args))
	full = append(full, waitArgs...)
	full = append(full, op, string(chain), "-t", string(table))
	full = append(full, args...)
	return e.exec.CommandContext(ctx, e.binary(""), full...).CombinedOutput()
}

// commandError wraps a failed iptables command with its output.
func commandError(what string, err error, out []byte) error {
	if msg := strings.TrimSpace(string(out)); msg != "" {
		return fmt.Errorf("%s: %w: %s", what, err, msg)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Present implements Interface.
func (e *Exec) Present(ctx context.Context) bool {
	_, err := e.run(ctx, "-S", TableNAT, ChainPostrouting)
	return err == nil
}

// Restore implements Interface.
func (e *Exec) Restore(ctx context.Context, data []byte) error {
	name := e.binary("-restore")
	args := append(append([]string{}, restoreWaitArgs...), "--noflush", "--counters")
	cmd := e.exec.CommandContext(ctx, name, args...)
	cmd.SetStdin(bytes.NewReader(data))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return newRestoreError(name, out, err)
	}
	return nil
}

// SaveInto implements Interface.
func (e *Exec) SaveInto(ctx context.Context, table Table, buf *bytes.Buffer) error {
	name := e.binary("-save")
	var stderr bytes.Buffer
	start := buf.Len()
	cmd := e.exec.CommandContext(ctx, name, "-t", string(table))
	cmd.SetStdout(buf)
	cmd.SetStderr(&stderr)
	if err := cmd.Run(); err != nil {
		buf.Truncate(start)
		return commandError(name+" -t "+string(table), err, stderr.Bytes())
	}
	return nil
}

// EnsureChain implements Interface.
func (e *Exec) EnsureChain(ctx context.Context, table Table, chain Chain) (bool, error) {
	out, err := e.run(ctx, "-N", table, chain)
	if err == nil {
		return false, nil
	}
	if exitStatus(err) == 1 {
		// iptables exits 1 when the operation failed, here "Chain already
		// exists" (2 is a bad command line, 4 a resource problem).
		return true, nil
	}
	return false, commandError(fmt.Sprintf("creating chain %s in %s", chain, table), err, out)
}

// ChainExists implements Interface.
func (e *Exec) ChainExists(ctx context.Context, table Table, chain Chain) (bool, error) {
	out, err := e.run(ctx, "-S", table, chain)
	if err == nil {
		return true, nil
	}
	if exitStatus(err) == 1 {
		return false, nil
	}
	return false, commandError(fmt.Sprintf("listing chain %s in %s", chain, table), err, out)
}

// EnsureRule implements Interface.
func (e *Exec) EnsureRule(ctx context.Context, prepend bool, table Table, chain Chain, args ...string) (bool, error) {
	exists, err := e.checkRule(ctx, table, chain, args...)
	if err != nil {
		return false, err
	}
	if exists {
		return true, nil
	}
	op := "-A"
	if prepend {
		op = "-I"
	}
	if out, err := e.run(ctx, op, table, chain, args...); err != nil {
		return false, commandError(fmt.Sprintf("adding rule to %s/%s", table, chain), err, out)
	}
	return false, nil
}

// checkRule runs "-C": exit 0 means present, exit 1 absent (the chain may be
// missing too, which is also "absent").
func (e *Exec) checkRule(ctx context.Context, table Table, chain Chain, args ...string) (bool, error) {
	out, err := e.run(ctx, "-C", table, chain, args...)
	if err == nil {
		return true, nil
	}
	if exitStatus(err) == 1 || isNotFoundOutput(out) {
		return false, nil
	}
	return false, commandError(fmt.Sprintf("checking rule in %s/%s", table, chain), err, out)
}

// DeleteRule implements Interface.
func (e *Exec) DeleteRule(ctx context.Context, table Table, chain Chain, args ...string) error {
	for range maxRuleCopies {
		exists, err := e.checkRule(ctx, table, chain, args...)
		if err != nil || !exists {
			return err
		}
		if out, err := e.run(ctx, "-D", table, chain, args...); err != nil {
			if isNotFoundOutput(out) {
				return nil // deleted by someone else in between
			}
			return commandError(fmt.Sprintf("deleting rule in %s/%s", table, chain), err, out)
		}
	}
	return fmt.Errorf("rule in %s/%s still present after %d deletions", table, chain, maxRuleCopies)
}

// FlushChain implements Interface.
func (e *Exec) FlushChain(ctx context.Context, table Table, chain Chain) error {
	if out, err := e.run(ctx, "-F", table, chain); err != nil {
		return commandError(fmt.Sprintf("flushing chain %s in %s", chain, table), err, out)
	}
	return nil
}

// DeleteChain implements Interface.
func (e *Exec) DeleteChain(ctx context.Context, table Table, chain Chain) error {
	out, err := e.run(ctx, "-X", table, chain)
	if err != nil && !isNotFoundOutput(out) {
		return commandError(fmt.Sprintf("deleting chain %s in %s", chain, table), err, out)
	}
	return nil
}

// exitStatus is the exit status of a command that ran and failed, or -1.
func exitStatus(err error) int {
	var exitErr utilexec.ExitError
	if errors.As(err, &exitErr) && exitErr.Exited() {
		return exitErr.ExitStatus()
	}
	return -1
}

// IsResourceError reports whether err says iptables could not try the
// request at all (exit status 4), typically because it did not get the
// xtables lock within the wait bound: retrying later may succeed.
func IsResourceError(err error) bool {
	return exitStatus(err) == exitStatusResourceProblem
}

// notFoundMessages are what iptables-legacy and iptables-nft (1.8.x) print
// when a chain, target or rule does not exist (upstream's list).
var notFoundMessages = []string{
	"No chain/target/match by that name",
	"No such file or directory",
	"does a matching rule exist",
	"does not exist",
}

func isNotFoundOutput(out []byte) bool {
	s := string(out)
	for _, m := range notFoundMessages {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// RestoreError is a failed iptables-restore run.
type RestoreError struct {
	// Command is the binary that ran (for example iptables-nft-restore).
	Command string
	// Output is its combined output, trimmed.
	Output string
	// Line is the failing line of the input (the first line is 1), or 0
	// when the output names none.
	Line int
	// Err is the underlying error (an exec.ExitError when it ran).
	Err error
}

func (e *RestoreError) Error() string {
	if e.Output == "" {
		return fmt.Sprintf("%s: %v", e.Command, e.Err)
	}
	return fmt.Sprintf("%s: %v: %s", e.Command, e.Err, e.Output)
}

func (e *RestoreError) Unwrap() error { return e.Err }

// restoreLine finds the failing line in iptables-restore's output: "line N
// failed" for a rejected command, "Error occurred at line: N" for a parse
// error.
var restoreLine = regexp.MustCompile(`line (\d+) failed|Error occurred at line: (\d+)`)

func newRestoreError(command string, out []byte, err error) *RestoreError {
	re := &RestoreError{Command: command, Output: strings.TrimSpace(string(out)), Err: err}
	if m := restoreLine.FindStringSubmatch(re.Output); m != nil {
		n := m[1]
		if n == "" {
			n = m[2]
		}
		re.Line, _ = strconv.Atoi(n)
	}
	return re
}

// Lines returns the lines of data from line-before to line+after (the first
// line is 1), each prefixed with its number, for logging the context of a
// failed restore.
func Lines(data []byte, line, before, after int) string {
	if line < 1 {
		return ""
	}
	var b strings.Builder
	n := 0
	for len(data) > 0 {
		n++
		cur := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			cur, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if n > line+after {
			break
		}
		if n >= line-before {
			fmt.Fprintf(&b, "%d: %s\n", n, cur)
		}
	}
	return b.String()
}
