package nftables

import (
	"hash/maphash"
	"slices"
)

// claimIndex records, for every element in the table, the fragments claiming it,
// in claim order (the kernel holds the value of the first claim).
//
// It is the largest part of a State (one entry per element: 120,000 at 10,000
// Services of 10 endpoints), so it is keyed by a 64-bit hash of the element ID and
// its entries point at the claiming elements instead of copying their strings: an
// element costs about 20 bytes here instead of about 160 with a map keyed by the
// ID. Hash collisions cost nothing in correctness: every lookup compares the IDs
// of the elements pointed at, so refs of distinct IDs under one hash are told
// apart.
type claimIndex struct {
	seed maphash.Seed
	// hashOf, when set, replaces the hash (tests force collisions with it).
	hashOf func(elementID) uint64
	// first holds the first ref of every hash; more the further refs of the few
	// hashes with several (elements claimed by several fragments, or collisions).
	first map[uint64]claimRef
	more  map[uint64][]claimRef
}

// claimRef is one fragment's claim: its element, by address in the fragment's
// Elements array (fragments are immutable and do not share their arrays, so
// equal refs are the same claim). A pointer rather than (fragment, index): the
// index's entries are 16 bytes instead of 24, 2 MB at 10,000 Services.
type claimRef struct{ e *Element }

// refTo is the claim of f on its element i.
func refTo(f *Fragment, i int) claimRef { return claimRef{&f.Elements[i]} }

func (r claimRef) element() *Element { return r.e }

func (r claimRef) claim() claim {
	e := r.element()
	return claim{e.Value, e.Comment}
}

// newClaimIndex returns an empty index with room for about size elements (a full
// sync knows its count: growing the map by doubling would leave as much garbage as
// the index itself).
func newClaimIndex(size int) *claimIndex {
	return &claimIndex{seed: maphash.MakeSeed(), first: make(map[uint64]claimRef, size), more: make(map[uint64][]claimRef)}
}

func (c *claimIndex) hash(id elementID) uint64 {
	if c.hashOf != nil {
		return c.hashOf(id)
	}
	return maphash.Comparable(c.seed, id)
}

// refsOfHash returns every ref under hash h, in order (a fresh slice when there are
// several, so the caller may modify it).
func (c *claimIndex) refsOfHash(h uint64) []claimRef {
	first, ok := c.first[h]
	if !ok {
		return nil
	}
	return append([]claimRef{first}, c.more[h]...)
}

// get returns the claims on id, in order.
func (c *claimIndex) get(id elementID) []claimRef {
	h := c.hash(id)
	first, ok := c.first[h]
	if !ok {
		return nil
	}
	more := c.more[h]
	if len(more) == 0 {
		if first.element().id() == id {
			return []claimRef{first}
		}
		return nil
	}
	return slices.DeleteFunc(c.refsOfHash(h), func(r claimRef) bool { return r.element().id() != id })
}

// only reports whether the element at index i of f, which the index holds, is
// the only claim on its ID (the common case, answered without allocating). With
// no further ref under the element's hash, the one ref in first is the element's
// own, so only the small map more is read: reading first, as large as the table,
// cost a cache miss per element, a sixth of the CPU of a full sync's encoding at
// 30,000 Services.
func (c *claimIndex) only(f *Fragment, i int) bool {
	return len(c.more[c.hash(f.Elements[i].id())]) == 0
}

// add appends a claim on the element at index i of f.
func (c *claimIndex) add(f *Fragment, i int) {
	ref := refTo(f, i)
	h := c.hash(f.Elements[i].id())
	if _, ok := c.first[h]; !ok {
		c.first[h] = ref
		return
	}
	c.more[h] = append(c.more[h], ref)
}

// set replaces the claims on id by refs (none: the element is gone), keeping the
// refs of other IDs under the same hash.
func (c *claimIndex) set(id elementID, refs []claimRef) {
	h := c.hash(id)
	all := slices.DeleteFunc(c.refsOfHash(h), func(r claimRef) bool { return r.element().id() == id })
	all = append(all, refs...)
	switch len(all) {
	case 0:
		delete(c.first, h)
		delete(c.more, h)
	case 1:
		c.first[h] = all[0]
		delete(c.more, h)
	default:
		c.first[h] = all[0]
		c.more[h] = slices.Clip(all[1:])
	}
}

// len returns the number of claims (for tests).
func (c *claimIndex) len() int {
	n := len(c.first)
	for _, more := range c.more {
		n += len(more)
	}
	return n
}
