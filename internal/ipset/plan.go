package ipset

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// Plan writes the `ipset restore -exist` script that makes the kernel's sets
// hold desired, given current (every existing set's entries, as Save returns
// them): for each desired set, in order, a create line if it does not exist,
// then a del line per stale entry (first, so that a full set has room), then
// an add line per missing entry, entries sorted. Sets in current but not in
// desired are left alone. The script is empty when nothing differs.
//
// The create line is upstream's: family, hashsize and maxelem for the hash
// types, the port range for bitmap:port. With -exist, creating a set that
// exists with the same options, adding an entry that is there and deleting
// one that is not are no-ops, so a script computed from a state that changed
// since still converges.
func Plan(desired []Contents, current map[string][]string) []byte {
	var b bytes.Buffer
	for _, c := range desired {
		name := c.Set.Name
		have, exists := current[name]
		if !exists {
			b.WriteString(CreateLine(c.Set))
			b.WriteByte('\n')
		}
		want := sortedUnique(c.Entries)
		haveSorted := sortedUnique(have)
		for _, e := range haveSorted {
			if _, found := slices.BinarySearch(want, e); !found {
				fmt.Fprintf(&b, "del %s %s\n", name, e)
			}
		}
		for _, e := range want {
			if _, found := slices.BinarySearch(haveSorted, e); !found {
				fmt.Fprintf(&b, "add %s %s\n", name, e)
			}
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
