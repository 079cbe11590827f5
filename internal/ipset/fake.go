package ipset

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Fake is an in-memory Interface. Restore runs scripts as `ipset restore
// -exist` does (create, add, del, flush, destroy), atomically: a script with
// an error changes nothing. Entries are checked against their set's type, in
// the notation `ipset save` prints. Fake is safe for concurrent use.
type Fake struct {
	mu sync.Mutex
	// VersionString is what Version returns ("v7.19" by default).
	VersionString string
	sets          map[string]*fakeSet
	errs          map[string]error
	inUse         map[string]bool
	restores      [][]byte
}

type fakeSet struct {
	create  string // the create line's options after the name
	typ     Type
	entries map[string]bool
}

var _ Interface = (*Fake)(nil)

// NewFake returns a Fake without sets, of ipset v7.19.
func NewFake() *Fake {
	return &Fake{VersionString: "v7.19", sets: map[string]*fakeSet{}, errs: map[string]error{}, inUse: map[string]bool{}}
}

// SetInUse marks a set as referenced by an iptables rule, which the kernel
// refuses to destroy ("in use by a kernel component").
func (f *Fake) SetInUse(name string, inUse bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inUse[name] = inUse
}

// SetError makes every later call of the named method ("Restore", "Version",
// ...) fail with err; a nil err clears it.
func (f *Fake) SetError(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.errs, method)
		return
	}
	f.errs[method] = err
}

// Restores returns the scripts restored so far.
func (f *Fake) Restores() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.restores)
}

// Version implements Interface.
func (f *Fake) Version(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errs["Version"]; err != nil {
		return "", err
	}
	return f.VersionString, nil
}

// ListSets implements Interface.
func (f *Fake) ListSets(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errs["ListSets"]; err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(f.sets)), nil
}

// Entries implements Interface.
func (f *Fake) Entries(_ context.Context, name string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errs["Entries"]; err != nil {
		return nil, err
	}
	s, ok := f.sets[name]
	if !ok {
		return nil, fmt.Errorf("ipset save %s: %w", name, ErrNotFound)
	}
	return slices.Sorted(maps.Keys(s.entries)), nil
}

// Save implements Interface.
func (f *Fake) Save(context.Context) (map[string][]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errs["Save"]; err != nil {
		return nil, err
	}
	out := make(map[string][]string, len(f.sets))
	for name, s := range f.sets {
		out[name] = slices.Sorted(maps.Keys(s.entries))
	}
	return out, nil
}

// Destroy implements Interface.
func (f *Fake) Destroy(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errs["Destroy"]; err != nil {
		return err
	}
	if f.inUse[name] {
		return fmt.Errorf("ipset destroy %s: Set cannot be destroyed: it is in use by a kernel component", name)
	}
	delete(f.sets, name)
	return nil
}

// Restore implements Interface.
func (f *Fake) Restore(_ context.Context, script []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errs["Restore"]; err != nil {
		return err
	}
	f.restores = append(f.restores, slices.Clone(script))
	// Work on a copy, so that a failing script changes nothing.
	sets := make(map[string]*fakeSet, len(f.sets))
	for name, s := range f.sets {
		sets[name] = &fakeSet{create: s.create, typ: s.typ, entries: maps.Clone(s.entries)}
	}
	for i, line := range strings.Split(string(script), "\n") {
		if err := restoreLine(sets, f.inUse, line); err != nil {
			return fmt.Errorf("ipset restore line %d %q: %w", i+1, line, err)
		}
	}
	f.sets = sets
	return nil
}

func restoreLine(sets map[string]*fakeSet, inUse map[string]bool, line string) error {
	fields := strings.Fields(line)
	if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
		return nil
	}
	if len(fields) < 2 {
		return fmt.Errorf("missing set name")
	}
	cmd, name := fields[0], fields[1]
	s, exists := sets[name]
	switch cmd {
	case "create":
		if len(fields) < 3 {
			return fmt.Errorf("missing type")
		}
		options := strings.Join(fields[2:], " ")
		if exists {
			if s.create != options {
				return fmt.Errorf("set %s exists with other options (%s)", name, s.create)
			}
			return nil
		}
		typ := Type(fields[2])
		if !slices.Contains([]Type{HashIPPort, HashIPPortIP, HashIPPortNet, HashIP, BitmapPort}, typ) {
			return fmt.Errorf("unknown type %s", typ)
		}
		sets[name] = &fakeSet{create: options, typ: typ, entries: map[string]bool{}}
		return nil
	case "destroy":
		if inUse[name] {
			return fmt.Errorf("set %s is in use by a kernel component", name)
		}
		delete(sets, name)
		return nil
	}
	if !exists {
		return fmt.Errorf("set %s: %w", name, ErrNotFound)
	}
	switch cmd {
	case "flush":
		clear(s.entries)
		return nil
	case "add", "del":
		if len(fields) != 3 {
			return fmt.Errorf("want one entry")
		}
		entry := fields[2]
		if err := checkEntry(s.typ, entry); err != nil {
			return err
		}
		if cmd == "add" {
			s.entries[entry] = true
		} else {
			delete(s.entries, entry)
		}
		return nil
	}
	return fmt.Errorf("unknown command %q", cmd)
}

// checkEntry checks that entry is in the notation ipset save prints for
// typ, so that tests catch what the kernel would store differently.
func checkEntry(typ Type, entry string) error {
	parts := strings.Split(entry, ",")
	want := strings.Count(string(typ), ",") + 1
	if len(parts) != want {
		return fmt.Errorf("entry %q: %s wants %d comma-separated parts", entry, typ, want)
	}
	if typ == BitmapPort {
		return checkPort(entry, parts[0])
	}
	if err := checkAddr(entry, parts[0]); err != nil {
		return err
	}
	if len(parts) >= 2 {
		proto, port, ok := strings.Cut(parts[1], ":")
		if !ok || !slices.Contains([]string{"tcp", "udp", "sctp"}, proto) {
			return fmt.Errorf("entry %q: %q is not tcp:, udp: or sctp:PORT", entry, parts[1])
		}
		if err := checkPort(entry, port); err != nil {
			return err
		}
	}
	switch typ {
	case HashIPPortIP:
		return checkAddr(entry, parts[2])
	case HashIPPortNet:
		if !strings.Contains(parts[2], "/") {
			return checkAddr(entry, parts[2]) // a host network
		}
		p, err := netip.ParsePrefix(parts[2])
		if err != nil {
			return fmt.Errorf("entry %q: %w", entry, err)
		}
		if p != p.Masked() || p.String() != parts[2] || p.IsSingleIP() {
			return fmt.Errorf("entry %q: ipset save prints the network as %s", entry, savedNet(p))
		}
	}
	return nil
}

func savedNet(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.Masked().String()
}

func checkAddr(entry, s string) error {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return fmt.Errorf("entry %q: %w", entry, err)
	}
	if a.String() != s || a.Zone() != "" {
		return fmt.Errorf("entry %q: ipset save prints the address as %s", entry, a.WithZone(""))
	}
	return nil
}

func checkPort(entry, s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 65535 || strconv.Itoa(n) != s {
		return fmt.Errorf("entry %q: port %q is not a number from 0 to 65535", entry, s)
	}
	return nil
}
