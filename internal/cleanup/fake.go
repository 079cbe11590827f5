package cleanup

import (
	"bufio"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"sigs.k8s.io/knftables"
)

// FakeIPTables is an in-memory IPTables for one family. It understands the
// subset of iptables-save/iptables-restore syntax the cleanup reads and
// writes, and like the kernel it refuses to delete a chain that a remaining
// rule jumps to.
type FakeIPTables struct {
	mu     sync.Mutex
	family IPFamily
	tables map[string]*fakeTable
	// Absent makes Present report false.
	Absent bool
	// FailRestore makes Restore of the named table fail without changes.
	FailRestore map[string]error
	// Restores records every Restore input, in order.
	Restores []FakeRestore
}

// FakeRestore is one recorded Restore call.
type FakeRestore struct {
	Table string
	Data  string
}

type fakeTable struct {
	chains []string          // declaration order
	policy map[string]string // "-" for user chains
	rules  map[string][]string
}

var _ IPTables = (*FakeIPTables)(nil)

// NewFakeIPTables returns a fake holding the tables of an iptables-save
// dump (any number of "*table ... COMMIT" sections).
func NewFakeIPTables(family IPFamily, dump string) (*FakeIPTables, error) {
	f := &FakeIPTables{family: family, tables: map[string]*fakeTable{}}
	if err := f.apply(dump, true); err != nil {
		return nil, err
	}
	return f, nil
}

// Family implements IPTables.
func (f *FakeIPTables) Family() IPFamily { return f.family }

// Present implements IPTables.
func (f *FakeIPTables) Present(context.Context) bool { return !f.Absent }

// Save implements IPTables.
func (f *FakeIPTables) Save(_ context.Context, table string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return []byte(f.dumpLocked(table)), nil
}

// Dump returns every table in iptables-save format, tables sorted.
func (f *FakeIPTables) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for name := range f.tables {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		b.WriteString(f.dumpLocked(name))
	}
	return b.String()
}

func (f *FakeIPTables) dumpLocked(table string) string {
	t, ok := f.tables[table]
	if !ok {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n", table)
	for _, c := range t.chains {
		fmt.Fprintf(&b, ":%s %s [0:0]\n", c, t.policy[c])
	}
	for _, c := range t.chains {
		for _, r := range t.rules[c] {
			fmt.Fprintf(&b, "-A %s %s\n", c, r)
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// Restore implements IPTables (always --noflush).
func (f *FakeIPTables) Restore(_ context.Context, table string, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Restores = append(f.Restores, FakeRestore{Table: table, Data: string(data)})
	if err := f.FailRestore[table]; err != nil {
		return err
	}
	return f.apply(string(data), false)
}

// DeleteRule implements IPTables.
func (f *FakeIPTables) DeleteRule(_ context.Context, table, chain string, args ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tables[table]
	if !ok {
		return nil
	}
	spec := renderArgs(args)
	t.rules[chain] = slices.DeleteFunc(t.rules[chain], func(r string) bool { return r == spec })
	return nil
}

// DeleteChain implements IPTables.
func (f *FakeIPTables) DeleteChain(_ context.Context, table, chain string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tables[table]
	if !ok || t.policy[chain] == "" {
		return nil
	}
	return t.deleteChain(chain)
}

// HasChain reports whether table holds chain.
func (f *FakeIPTables) HasChain(table, chain string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tables[table]
	return ok && t.policy[chain] != ""
}

// Rules returns the rule specifications of one chain.
func (f *FakeIPTables) Rules(table, chain string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t, ok := f.tables[table]; ok {
		return slices.Clone(t.rules[chain])
	}
	return nil
}

func (t *fakeTable) clone() *fakeTable {
	c := &fakeTable{chains: slices.Clone(t.chains), policy: map[string]string{}, rules: map[string][]string{}}
	for k, v := range t.policy {
		c.policy[k] = v
	}
	for k, v := range t.rules {
		c.rules[k] = slices.Clone(v)
	}
	return c
}

func (t *fakeTable) deleteChain(chain string) error {
	if t.policy[chain] != "-" {
		return fmt.Errorf("cannot delete built-in chain %s", chain)
	}
	if len(t.rules[chain]) > 0 {
		return fmt.Errorf("chain %s is not empty", chain)
	}
	for _, c := range t.chains {
		for _, r := range t.rules[c] {
			if jumpTarget(r) == chain {
				return fmt.Errorf("chain %s is referenced by %q in %s", chain, r, c)
			}
		}
	}
	t.chains = slices.DeleteFunc(t.chains, func(c string) bool { return c == chain })
	delete(t.policy, chain)
	delete(t.rules, chain)
	return nil
}

// apply interprets iptables-save/restore text. Each table section is
// applied atomically. load declares chains with their policy (a dump);
// otherwise a declaration of an existing chain flushes it (--noflush).
func (f *FakeIPTables) apply(data string, load bool) error {
	var cur *fakeTable
	var name string
	sc := bufio.NewScanner(strings.NewReader(data))
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			name = line[1:]
			if t, ok := f.tables[name]; ok {
				cur = t.clone()
			} else {
				cur = &fakeTable{policy: map[string]string{}, rules: map[string][]string{}}
			}
		case cur == nil:
			return fmt.Errorf("line %d: %q outside a table", lineNo, line)
		case line == "COMMIT":
			f.tables[name] = cur
			cur = nil
		case strings.HasPrefix(line, ":"):
			fields := strings.Fields(line[1:])
			chain, policy := fields[0], "-"
			if len(fields) > 1 {
				policy = fields[1]
			}
			if _, ok := cur.policy[chain]; !ok {
				cur.chains = append(cur.chains, chain)
				cur.policy[chain] = policy
			} else if !load {
				cur.rules[chain] = nil
			}
		case strings.HasPrefix(line, "-A "):
			chain, spec, _ := strings.Cut(line[3:], " ")
			if _, ok := cur.policy[chain]; !ok {
				return fmt.Errorf("line %d: no chain %s", lineNo, chain)
			}
			cur.rules[chain] = append(cur.rules[chain], spec)
		case strings.HasPrefix(line, "-X "):
			if err := cur.deleteChain(strings.TrimSpace(line[3:])); err != nil {
				return fmt.Errorf("line %d: %w", lineNo, err)
			}
		default:
			return fmt.Errorf("line %d: unsupported %q", lineNo, line)
		}
	}
	if cur != nil {
		return fmt.Errorf("table %s: missing COMMIT", name)
	}
	return nil
}

// renderArgs formats rule arguments the way iptables-save prints them.
func renderArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " \t") {
			a = `"` + a + `"`
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// jumpTarget returns the chain a rule specification jumps or goes to.
func jumpTarget(spec string) string {
	fields := strings.Fields(spec)
	for i := 0; i+1 < len(fields); i++ {
		switch fields[i] {
		case "-j", "--jump", "-g", "--goto":
			return fields[i+1]
		}
	}
	return ""
}

// FakeNFTables returns an NFTablesFactory serving the given fakes; a family
// without a fake behaves like a host where nft is unusable.
func FakeNFTables(fakes map[knftables.Family]*knftables.Fake) NFTablesFactory {
	return func(family knftables.Family, table string) (knftables.Interface, error) {
		f, ok := fakes[family]
		if !ok {
			return nil, fmt.Errorf("no nftables for family %s", family)
		}
		return f, nil
	}
}

// FakeIPSets is an in-memory IPSets.
type FakeIPSets struct {
	mu sync.Mutex
	// Sets are the existing sets.
	Sets map[string]bool
	// Unavailable makes Available report false.
	Unavailable bool
	// InUse sets cannot be destroyed (referenced by a rule).
	InUse map[string]bool
}

var _ IPSets = (*FakeIPSets)(nil)

// Available implements IPSets.
func (s *FakeIPSets) Available(context.Context) bool { return !s.Unavailable }

// Destroy implements IPSets.
func (s *FakeIPSets) Destroy(_ context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.InUse[name] {
		return fmt.Errorf("ipset destroy %s: set is in use by a kernel component", name)
	}
	delete(s.Sets, name)
	return nil
}

// FakeLinks is an in-memory Links.
type FakeLinks struct {
	mu    sync.Mutex
	Links map[string]netlink.Link
}

var _ Links = (*FakeLinks)(nil)

// LinkByName implements Links.
func (l *FakeLinks) LinkByName(name string) (netlink.Link, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if link, ok := l.Links[name]; ok {
		return link, nil
	}
	return nil, netlink.LinkNotFoundError{}
}

// LinkDel implements Links.
func (l *FakeLinks) LinkDel(link netlink.Link) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.Links, link.Attrs().Name)
	return nil
}

// FakeIPVS is an in-memory IPVS.
type FakeIPVS struct {
	// Err is returned by Flush (e.g. ErrIPVSUnavailable).
	Err error
	// Flushes counts Flush calls.
	Flushes int
}

var _ IPVS = (*FakeIPVS)(nil)

// Flush implements IPVS.
func (v *FakeIPVS) Flush(context.Context) error {
	v.Flushes++
	return v.Err
}
