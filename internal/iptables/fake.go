package iptables

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// Fake is an in-memory Interface for one family. It keeps the tables as
// iptables-save would print them and applies Restore input like
// iptables-restore --noflush does:
//
//   - "*table" opens a section and "COMMIT" applies it atomically; a failing
//     line discards its section (earlier, committed sections of the same
//     input stay, as with the real binaries) and Restore returns a
//     *RestoreError naming the line;
//   - ":CHAIN - [0:0]" creates a user chain or flushes an existing one; a
//     built-in chain's declaration only sets its policy (it is not flushed);
//   - -A, -I [n], -D (fails when the rule is absent), -N, -F and -X (fails
//     when the chain is absent, built-in, not empty or still referenced);
//   - arguments are split like iptables-restore does (double quotes,
//     backslash escapes inside them), so quoted comments work;
//   - a jump (-j/-g) must name a chain of the table or a standard or
//     extension target, and the nat table refuses DROP, as the real ones do.
//
// Rules are stored as given and compared argument by argument: unlike the
// kernel, "-p tcp --dport 80" and "-p tcp -m tcp --dport 80" differ. Tables
// nat, filter and mangle exist from the start; raw and security when first
// named. Failures can be injected per operation with FailNext and
// FailAlways. Fake is safe for concurrent use.
type Fake struct {
	mu       sync.Mutex
	family   v1.IPFamily
	tables   map[Table]*fakeTable
	absent   bool
	failNext map[Op][]error
	failAll  map[Op]error
	calls    map[Op]int
	restores []string
}

// Op names an Interface method, for failure injection and call counts.
type Op string

// Operations of Interface.
const (
	OpRestore     Op = "Restore"
	OpSaveInto    Op = "SaveInto"
	OpEnsureChain Op = "EnsureChain"
	OpChainExists Op = "ChainExists"
	OpEnsureRule  Op = "EnsureRule"
	OpDeleteRule  Op = "DeleteRule"
	OpFlushChain  Op = "FlushChain"
	OpDeleteChain Op = "DeleteChain"
)

var _ Interface = (*Fake)(nil)

// builtinChains are the built-in chains of each table, in iptables-save's
// order.
var builtinChains = map[Table][]Chain{
	TableFilter: {ChainInput, ChainForward, ChainOutput},
	TableNAT:    {ChainPrerouting, ChainInput, ChainOutput, ChainPostrouting},
	TableMangle: {ChainPrerouting, ChainInput, ChainForward, ChainOutput, ChainPostrouting},
	"raw":       {ChainPrerouting, ChainOutput},
	"security":  {ChainInput, ChainForward, ChainOutput},
}

type fakeTable struct {
	chains map[Chain]*fakeChain
}

type fakeChain struct {
	policy string // "-" for user chains
	rules  [][]string
}

func newFakeTable(name Table) *fakeTable {
	t := &fakeTable{chains: map[Chain]*fakeChain{}}
	for _, c := range builtinChains[name] {
		t.chains[c] = &fakeChain{policy: "ACCEPT"}
	}
	return t
}

func (t *fakeTable) clone() *fakeTable {
	c := &fakeTable{chains: make(map[Chain]*fakeChain, len(t.chains))}
	for name, ch := range t.chains {
		c.chains[name] = &fakeChain{policy: ch.policy, rules: slices.Clone(ch.rules)}
	}
	return c
}

// NewFake returns an empty Fake: nat, filter and mangle with their built-in
// chains, no rules.
func NewFake(family v1.IPFamily) *Fake {
	f := &Fake{
		family:   family,
		tables:   map[Table]*fakeTable{},
		failNext: map[Op][]error{},
		failAll:  map[Op]error{},
		calls:    map[Op]int{},
	}
	for _, t := range []Table{TableNAT, TableFilter, TableMangle} {
		f.tables[t] = newFakeTable(t)
	}
	return f
}

// Family implements Interface.
func (f *Fake) Family() v1.IPFamily { return f.family }

// Present implements Interface.
func (f *Fake) Present(context.Context) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.absent
}

// SetPresent makes Present report present (the default) or not.
func (f *Fake) SetPresent(present bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.absent = !present
}

// FailNext makes the next call of op return err without changing anything.
// Calls queue up: FailNext twice fails the next two calls.
func (f *Fake) FailNext(op Op, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext[op] = append(f.failNext[op], err)
}

// FailAlways makes every call of op return err without changing anything,
// until FailAlways(op, nil).
func (f *Fake) FailAlways(op Op, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.failAll, op)
	} else {
		f.failAll[op] = err
	}
}

// Calls reports how many times op was called (failed calls included).
func (f *Fake) Calls(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// Restores returns the input of every Restore call so far, in order (failed
// ones included).
func (f *Fake) Restores() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.restores)
}

// begin counts a call of op and returns its injected failure, if any. The
// caller holds f.mu.
func (f *Fake) begin(op Op) error {
	f.calls[op]++
	if q := f.failNext[op]; len(q) > 0 {
		f.failNext[op] = q[1:]
		return q[0]
	}
	return f.failAll[op]
}

func (f *Fake) binary(tool string) string {
	if f.family == v1.IPv6Protocol {
		return "ip6tables" + tool
	}
	return "iptables" + tool
}

// Restore implements Interface.
func (f *Fake) Restore(_ context.Context, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restores = append(f.restores, string(data))
	if err := f.begin(OpRestore); err != nil {
		return err
	}
	return f.apply(string(data), false)
}

// Load adds an iptables-save dump (any number of "*table ... COMMIT"
// sections) to the state, for setting up tests: unlike Restore, declaring an
// existing chain does not flush it, so loading two dumps adds up their rules.
func (f *Fake) Load(dump string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.apply(dump, true)
}

// SaveInto implements Interface.
func (f *Fake) SaveInto(_ context.Context, table Table, buf *bytes.Buffer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(OpSaveInto); err != nil {
		return err
	}
	t, err := f.table(table)
	if err != nil {
		return fmt.Errorf("%s -t %s: %w", f.binary("-save"), table, err)
	}
	t.dump(table, buf)
	return nil
}

// EnsureChain implements Interface.
func (f *Fake) EnsureChain(_ context.Context, table Table, chain Chain) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(OpEnsureChain); err != nil {
		return false, err
	}
	t, err := f.table(table)
	if err != nil {
		return false, err
	}
	if t.chains[chain] != nil {
		return true, nil
	}
	if err := t.newChain(chain); err != nil {
		return false, f.cmdError("-N", table, chain, err)
	}
	return false, nil
}

// ChainExists implements Interface.
func (f *Fake) ChainExists(_ context.Context, table Table, chain Chain) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(OpChainExists); err != nil {
		return false, err
	}
	t := f.tables[table]
	return t != nil && t.chains[chain] != nil, nil
}

// EnsureRule implements Interface.
func (f *Fake) EnsureRule(_ context.Context, prepend bool, table Table, chain Chain, args ...string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(OpEnsureRule); err != nil {
		return false, err
	}
	t, err := f.table(table)
	if err != nil {
		return false, err
	}
	if c := t.chains[chain]; c != nil && slices.ContainsFunc(c.rules, func(r []string) bool { return slices.Equal(r, args) }) {
		return true, nil
	}
	pos := -1
	op := "-A"
	if prepend {
		pos, op = 1, "-I"
	}
	if err := t.addRule(table, chain, pos, slices.Clone(args)); err != nil {
		return false, f.cmdError(op, table, chain, err)
	}
	return false, nil
}

// DeleteRule implements Interface.
func (f *Fake) DeleteRule(_ context.Context, table Table, chain Chain, args ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(OpDeleteRule); err != nil {
		return err
	}
	if t := f.tables[table]; t != nil {
		if c := t.chains[chain]; c != nil {
			c.rules = slices.DeleteFunc(c.rules, func(r []string) bool { return slices.Equal(r, args) })
		}
	}
	return nil
}

// FlushChain implements Interface.
func (f *Fake) FlushChain(_ context.Context, table Table, chain Chain) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(OpFlushChain); err != nil {
		return err
	}
	t, err := f.table(table)
	if err != nil {
		return err
	}
	c := t.chains[chain]
	if c == nil {
		return f.cmdError("-F", table, chain, errNoChain)
	}
	c.rules = nil
	return nil
}

// DeleteChain implements Interface.
func (f *Fake) DeleteChain(_ context.Context, table Table, chain Chain) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(OpDeleteChain); err != nil {
		return err
	}
	t := f.tables[table]
	if t == nil || t.chains[chain] == nil {
		return nil
	}
	if err := t.deleteChain(chain); err != nil {
		return f.cmdError("-X", table, chain, err)
	}
	return nil
}

// cmdError is the error of a failed single iptables command: it wraps an
// exit status 1, as the real command's.
func (f *Fake) cmdError(op string, table Table, chain Chain, err error) error {
	return fmt.Errorf("%s %s %s -t %s: %w: %w", f.binary(""), op, chain, table, exitError(1), err)
}

// HasChain reports whether table holds chain.
func (f *Fake) HasChain(table Table, chain Chain) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tables[table]
	return t != nil && t.chains[chain] != nil
}

// Chains returns the chains of table in iptables-save's order: built-in
// chains first, then user chains by name.
func (f *Fake) Chains(table Table) []Chain {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.tables[table]; t != nil {
		return t.order(table)
	}
	return nil
}

// Rules returns the rules of one chain as iptables-save prints them after
// "-A CHAIN ".
func (f *Fake) Rules(table Table, chain Chain) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tables[table]
	if t == nil || t.chains[chain] == nil {
		return nil
	}
	var out []string
	for _, r := range t.chains[chain].rules {
		out = append(out, renderArgs(r))
	}
	return out
}

// Dump returns one table in iptables-save format (no "#" header lines, no
// rule counters), or "" when the table does not exist.
func (f *Fake) Dump(table Table) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tables[table]
	if t == nil {
		return ""
	}
	var b bytes.Buffer
	t.dump(table, &b)
	return b.String()
}

// DumpAll returns every table, by name, in iptables-save format.
func (f *Fake) DumpAll() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]Table, 0, len(f.tables))
	for name := range f.tables {
		names = append(names, name)
	}
	slices.Sort(names)
	var b bytes.Buffer
	for _, name := range names {
		f.tables[name].dump(name, &b)
	}
	return b.String()
}

// table returns the named table, creating a known one on first use.
func (f *Fake) table(name Table) (*fakeTable, error) {
	if t := f.tables[name]; t != nil {
		return t, nil
	}
	if _, ok := builtinChains[name]; !ok {
		return nil, fmt.Errorf("can't initialize %s table `%s': Table does not exist", f.binary(""), name)
	}
	t := newFakeTable(name)
	f.tables[name] = t
	return t, nil
}

// order lists the chains as iptables-save does.
func (t *fakeTable) order(name Table) []Chain {
	var out, user []Chain
	for _, c := range builtinChains[name] {
		if t.chains[c] != nil {
			out = append(out, c)
		}
	}
	for c, ch := range t.chains {
		if ch.policy == "-" {
			user = append(user, c)
		}
	}
	sort.Slice(user, func(i, j int) bool { return user[i] < user[j] })
	return append(out, user...)
}

func (t *fakeTable) dump(name Table, b *bytes.Buffer) {
	order := t.order(name)
	fmt.Fprintf(b, "*%s\n", name)
	for _, c := range order {
		fmt.Fprintf(b, ":%s %s [0:0]\n", c, t.chains[c].policy)
	}
	for _, c := range order {
		for _, r := range t.chains[c].rules {
			fmt.Fprintf(b, "-A %s %s\n", c, renderArgs(r))
		}
	}
	b.WriteString("COMMIT\n")
}

// renderArgs formats rule arguments the way iptables-save prints them: a
// comment is quoted unless it is only letters, digits, '-' and '_' (as
// xtables_save_string does); any other argument only when it must be.
func renderArgs(args []string) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		comment := i > 0 && args[i-1] == "--comment"
		if comment {
			b.WriteString(SaveString(a))
		} else if a == "" || strings.ContainsAny(a, " \t\"\\'") {
			b.WriteString(quoted(a))
		} else {
			b.WriteString(a)
		}
	}
	return b.String()
}

// exitError is an exec.ExitError for the fake's failures.
type exitError int

func (e exitError) Error() string   { return fmt.Sprintf("exit status %d", int(e)) }
func (e exitError) String() string  { return e.Error() }
func (e exitError) Exited() bool    { return true }
func (e exitError) ExitStatus() int { return int(e) }
