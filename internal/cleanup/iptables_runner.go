package cleanup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	utilexec "k8s.io/utils/exec"
)

// IPFamily selects iptables (IPv4) or ip6tables (IPv6).
type IPFamily string

// IP families.
const (
	IPv4 IPFamily = "IPv4"
	IPv6 IPFamily = "IPv6"
)

// IPTables is the boundary to one family's iptables in one backend. All
// methods take plain table and chain names.
type IPTables interface {
	// Family reports which family this instance manages.
	Family() IPFamily
	// Present reports whether this family's iptables is usable on this host
	// (upstream's check: listing nat POSTROUTING succeeds).
	Present(ctx context.Context) bool
	// Save returns the iptables-save output of one table.
	Save(ctx context.Context, table string) ([]byte, error)
	// Restore feeds data to iptables-restore for one table without flushing
	// the table (--noflush) and keeping counters.
	Restore(ctx context.Context, table string, data []byte) error
	// DeleteRule deletes every copy of a rule; an absent rule or chain is
	// not an error.
	DeleteRule(ctx context.Context, table, chain string, args ...string) error
	// DeleteChain deletes an (empty, unreferenced) chain; an absent chain is
	// not an error.
	DeleteChain(ctx context.Context, table, chain string) error
}

// Backend is the kernel interface iptables binaries talk to.
type Backend string

// Backends. BackendPlain runs the plain iptables binaries, whichever
// backend the host's alternatives (or upstream's wrapper) point them at.
const (
	BackendNFT    Backend = "nft"
	BackendLegacy Backend = "legacy"
	BackendPlain  Backend = "plain"
)

// waitArgs makes iptables wait for the xtables lock as upstream does.
var waitArgs = []string{"-w", "5"}

// maxRuleCopies bounds the loop deleting duplicated jump rules.
const maxRuleCopies = 16

// ExecIPTables implements IPTables by running the iptables binaries of one
// family and backend through Exec (so tests can fake or re-target it).
type ExecIPTables struct {
	Exec    utilexec.Interface
	IPFam   IPFamily
	Backend Backend
}

var _ IPTables = (*ExecIPTables)(nil)

// NewExecIPTables returns an IPTables for one family and backend.
func NewExecIPTables(exec utilexec.Interface, family IPFamily, backend Backend) *ExecIPTables {
	return &ExecIPTables{Exec: exec, IPFam: family, Backend: backend}
}

// Family implements IPTables.
func (r *ExecIPTables) Family() IPFamily { return r.IPFam }

// binary returns the command for tool ("", "-save" or "-restore"), using the
// backend-specific name when it is installed and the plain name otherwise.
func (r *ExecIPTables) binary(tool string) string {
	return iptablesBinary(r.Exec, r.IPFam, r.Backend, tool)
}

func iptablesBinary(exec utilexec.Interface, family IPFamily, backend Backend, tool string) string {
	base := "iptables"
	if family == IPv6 {
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

func (r *ExecIPTables) run(ctx context.Context, op, table, chain string, args ...string) ([]byte, error) {
	full := append(append([]string{}, waitArgs...), op, chain, "-t", table)
	full = append(full, args...)
	return r.Exec.CommandContext(ctx, r.binary(""), full...).CombinedOutput()
}

// Present implements IPTables.
func (r *ExecIPTables) Present(ctx context.Context) bool {
	_, err := r.run(ctx, "-S", tableNAT, "POSTROUTING")
	return err == nil
}

// Save implements IPTables.
func (r *ExecIPTables) Save(ctx context.Context, table string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := r.Exec.CommandContext(ctx, r.binary("-save"), "-t", table)
	cmd.SetStdout(&stdout)
	cmd.SetStderr(&stderr)
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s -t %s: %w: %s", r.binary("-save"), table, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// Restore implements IPTables.
func (r *ExecIPTables) Restore(ctx context.Context, table string, data []byte) error {
	args := append(append([]string{}, waitArgs...), "-T", table, "--noflush", "--counters")
	cmd := r.Exec.CommandContext(ctx, r.binary("-restore"), args...)
	cmd.SetStdin(bytes.NewReader(data))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s -T %s: %w: %s", r.binary("-restore"), table, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// DeleteRule implements IPTables.
func (r *ExecIPTables) DeleteRule(ctx context.Context, table, chain string, args ...string) error {
	for range maxRuleCopies {
		out, err := r.run(ctx, "-C", table, chain, args...)
		if err != nil {
			if isRuleAbsent(err, out) {
				return nil
			}
			return fmt.Errorf("checking rule in %s/%s: %w: %s", table, chain, err, strings.TrimSpace(string(out)))
		}
		if out, err := r.run(ctx, "-D", table, chain, args...); err != nil {
			if isNotFoundOutput(out) {
				return nil
			}
			return fmt.Errorf("deleting rule in %s/%s: %w: %s", table, chain, err, strings.TrimSpace(string(out)))
		}
	}
	return fmt.Errorf("rule in %s/%s still present after %d deletions", table, chain, maxRuleCopies)
}

// DeleteChain implements IPTables.
func (r *ExecIPTables) DeleteChain(ctx context.Context, table, chain string) error {
	out, err := r.run(ctx, "-X", table, chain)
	if err != nil && !isNotFoundOutput(out) {
		return fmt.Errorf("deleting chain %s/%s: %w: %s", table, chain, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// isRuleAbsent: iptables -C exits 1 when the rule is not there; other
// failures count as "absent" only when they say the chain or target is
// missing.
func isRuleAbsent(err error, out []byte) bool {
	var exitErr utilexec.ExitError
	if errors.As(err, &exitErr) && exitErr.Exited() && exitErr.ExitStatus() == 1 {
		return true
	}
	return isNotFoundOutput(out)
}

// notFoundMessages are what iptables-legacy and iptables-nft (1.8.x) print
// when a chain, target or rule does not exist.
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
