package ipset

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// SavedSet is one set as `ipset save` lists it.
type SavedSet struct {
	// Contents holds the set's name, type and family (from its create line; the
	// type is empty for a set only added to) and its entries, sorted.
	Contents
	// Options are the options written after an entry ("nomatch", "timeout 5"),
	// by entry, for the entries that have some.
	Options map[string]string
}

// ParseSaveSets reads `ipset save` output: every set created or added to in it,
// in the order of first appearance, with its type, family ("family inet6";
// IPv4 otherwise for a hash type, none for a bitmap) and entries.
func ParseSaveSets(out []byte) ([]SavedSet, error) {
	var sets []SavedSet
	index := map[string]int{}
	get := func(name string) *SavedSet {
		i, ok := index[name]
		if !ok {
			i = len(sets)
			index[name] = i
			sets = append(sets, SavedSet{Contents: Contents{Set: Set{Name: name}, Entries: []string{}}})
		}
		return &sets[i]
	}
	for i, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if fields[0] != "create" && fields[0] != "add" {
			return nil, fmt.Errorf("ipset save line %d: unknown command %q", i+1, fields[0])
		}
		if len(fields) < 3 {
			return nil, fmt.Errorf("ipset save line %d: malformed %q", i+1, line)
		}
		s := get(fields[1])
		if fields[0] == "create" {
			s.Set.Type = Type(fields[2])
			if strings.HasPrefix(fields[2], "hash:") {
				s.Set.Family = v1.IPv4Protocol
			}
			for j := 3; j+1 < len(fields); j++ {
				if fields[j] == "family" && fields[j+1] == "inet6" {
					s.Set.Family = v1.IPv6Protocol
				}
			}
			continue
		}
		// An entry is one field; options (timeout, nomatch, comment) follow it.
		s.Entries = append(s.Entries, fields[2])
		if len(fields) > 3 {
			if s.Options == nil {
				s.Options = map[string]string{}
			}
			s.Options[fields[2]] = strings.Join(fields[3:], " ")
		}
	}
	for i := range sets {
		slices.Sort(sets[i].Entries)
	}
	return sets, nil
}

// ParseSave reads `ipset save` output: every set created in it, with the
// entries added to it, sorted.
func ParseSave(out []byte) (map[string][]string, error) {
	saved, err := ParseSaveSets(out)
	if err != nil {
		return nil, err
	}
	sets := make(map[string][]string, len(saved))
	for _, s := range saved {
		sets[s.Set.Name] = s.Entries
	}
	return sets, nil
}
