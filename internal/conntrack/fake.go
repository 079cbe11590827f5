package conntrack

import (
	"sync"

	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
)

// Fake is an in-memory conntrack table behind the real Interface implementation, so
// tests exercise the same filter logic as production.
type Fake struct {
	Interface
	table *fakeTable
}

// NewFake returns an empty fake table.
func NewFake() *Fake {
	t := &fakeTable{entries: map[netlink.InetFamily][]*netlink.ConntrackFlow{}}
	return &Fake{Interface: &conntracker{handler: t}, table: t}
}

// SetEntries replaces the entries of the family.
func (f *Fake) SetEntries(family v1.IPFamily, flows []*netlink.ConntrackFlow) {
	fam, _ := inetFamily(family)
	f.table.mu.Lock()
	defer f.table.mu.Unlock()
	f.table.entries[fam] = append([]*netlink.ConntrackFlow(nil), flows...)
}

// Entries returns the current entries of the family.
func (f *Fake) Entries(family v1.IPFamily) []*netlink.ConntrackFlow {
	fam, _ := inetFamily(family)
	f.table.mu.Lock()
	defer f.table.mu.Unlock()
	return append([]*netlink.ConntrackFlow(nil), f.table.entries[fam]...)
}

// SetListError makes the next list calls fail with err (after returning the
// current entries, as a partial dump does); nil clears it.
func (f *Fake) SetListError(err error) {
	f.table.mu.Lock()
	defer f.table.mu.Unlock()
	f.table.listErr = err
}

type fakeTable struct {
	mu      sync.Mutex
	entries map[netlink.InetFamily][]*netlink.ConntrackFlow
	listErr error
}

func (t *fakeTable) ConntrackTableList(_ netlink.ConntrackTableType, fam netlink.InetFamily) ([]*netlink.ConntrackFlow, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]*netlink.ConntrackFlow(nil), t.entries[fam]...)
	if t.listErr != nil {
		return out, t.listErr
	}
	return out, nil
}

func (t *fakeTable) ConntrackDeleteFilters(_ netlink.ConntrackTableType, fam netlink.InetFamily, filters ...netlink.CustomConntrackFilter) (uint, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var kept []*netlink.ConntrackFlow
	var deleted uint
	for _, flow := range t.entries[fam] {
		matched := false
		for _, f := range filters {
			if f.MatchConntrackFlow(flow) {
				matched = true
				break
			}
		}
		if matched {
			deleted++
		} else {
			kept = append(kept, flow)
		}
	}
	t.entries[fam] = kept
	return deleted, nil
}
