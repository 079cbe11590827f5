package ipset

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// SetDiff is how the kernel's version of one desired set differs from it:
// Create when the set does not exist, Stale its entries to delete and Absent the
// entries to add (each sorted); Want counts the desired entries.
type SetDiff struct {
	Set           Set
	Create        bool
	Stale, Absent []string
	Want          int
}

// Diff returns how the kernel's sets (current: every existing set's entries, as
// Save returns them) differ from desired: one SetDiff per desired set that
// differs, in desired's order. Sets in current but not in desired are left out:
// they are not the caller's. The ipvs mode's writer turns the result into its
// restore script (Script) and its drift detection into differences, so the two
// agree on what differs.
func Diff(desired []Contents, current map[string][]string) []SetDiff {
	var out []SetDiff
	for _, c := range desired {
		have, exists := current[c.Set.Name]
		want := sortedUnique(c.Entries)
		d := SetDiff{Set: c.Set, Create: !exists, Want: len(want)}
		haveSorted := sortedUnique(have)
		for _, e := range haveSorted {
			if _, found := slices.BinarySearch(want, e); !found {
				d.Stale = append(d.Stale, e)
			}
		}
		for _, e := range want {
			if _, found := slices.BinarySearch(haveSorted, e); !found {
				d.Absent = append(d.Absent, e)
			}
		}
		if d.Create || len(d.Stale) > 0 || len(d.Absent) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// Plan writes the `ipset restore -exist` script that makes the kernel's sets
// hold desired, given current (every existing set's entries, as Save returns
// them): Script(Diff(desired, current)). Sets in current but not in desired are
// left alone. The script is empty when nothing differs.
//
// The create line is upstream's: family, hashsize and maxelem for the hash
// types, the port range for bitmap:port. With -exist, creating a set that
// exists with the same options, adding an entry that is there and deleting
// one that is not are no-ops, so a script computed from a state that changed
// since still converges.
func Plan(desired []Contents, current map[string][]string) []byte {
	return Script(Diff(desired, current))
}

// Script writes the `ipset restore -exist` script of diffs: for each set, in
// order, a create line if it does not exist, then a del line per stale entry
// (first, so that a full set has room), then an add line per absent one.
func Script(diffs []SetDiff) []byte {
	var b bytes.Buffer
	for _, d := range diffs {
		if d.Create {
			b.WriteString(CreateLine(d.Set))
			b.WriteByte('\n')
		}
		for _, e := range d.Stale {
			fmt.Fprintf(&b, "del %s %s\n", d.Set.Name, e)
		}
		for _, e := range d.Absent {
			fmt.Fprintf(&b, "add %s %s\n", d.Set.Name, e)
		}
	}
	return b.Bytes()
}

// CreateLine is the restore command that creates s with upstream's options,
// without the trailing newline.
func CreateLine(s Set) string {
	switch s.Type {
	case BitmapPort:
		return fmt.Sprintf("create %s %s range %s", s.Name, s.Type, DefaultPortRange)
	default:
		return fmt.Sprintf("create %s %s family %s hashsize %s maxelem %s",
			s.Name, s.Type, FamilyOption(s.Family), strconv.Itoa(HashSize), strconv.Itoa(MaxElem))
	}
}

// FamilyOption is the ipset "family" option of an IP family: inet6 for IPv6,
// inet otherwise (upstream's default).
func FamilyOption(f v1.IPFamily) string {
	if f == v1.IPv6Protocol {
		return "inet6"
	}
	return "inet"
}

func sortedUnique(entries []string) []string {
	s := slices.Clone(entries)
	slices.Sort(s)
	return slices.Compact(s)
}
