package nftnetlink

import (
	"encoding/binary"
	"fmt"
	"iter"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/kproxy/kproxy/internal/nft"
)

// An Inventory is what one table holds, reduced to the canonical forms of
// canon.go and hashed: one number per chain and set definition, per rule and per
// element. The inventory of what kproxy wrote (InventoryOf) and the inventory of
// what the kernel holds (ReadInventory) are equal exactly when nobody changed
// the table in between; CompareInventories lists how they differ.
type Inventory struct {
	// Exists: the table exists.
	Exists bool
	// Chains by name.
	Chains map[string]*InventoryChain
	// Sets holds the named sets and maps, by name.
	Sets map[string]*InventorySet
	// Counters are the named counters.
	Counters map[string]bool
}

// InventoryChain is one chain.
type InventoryChain struct {
	// Def is the digest of its definition (base chain hook, type, priority,
	// policy; comment).
	Def uint64
	// Rules are the digests of its rules, in order.
	Rules []uint64
}

// InventorySet is one named set or map.
type InventorySet struct {
	Map bool
	// Def is the digest of its definition (type, flags, timeout, comment).
	Def uint64
	// Dynamic sets are filled by the packet path (session affinity): their
	// elements are not kproxy's to compare, and Elements is nil.
	Dynamic bool
	// Elements are the digests of its elements (keys and values).
	Elements map[uint64]bool
}

func newInventory() *Inventory {
	return &Inventory{Chains: map[string]*InventoryChain{}, Sets: map[string]*InventorySet{}, Counters: map[string]bool{}}
}

// dynamicSetFlags mark a set the packet path writes into.
const dynamicSetFlags = unix.NFT_SET_EVAL | unix.NFT_SET_TIMEOUT

// InventoryOf returns the inventory of the table the typed operations ops leave
// behind when applied to an empty kernel (a full sync, render/nftables.FullOps). It
// encodes ops as RunOps would, without a socket, and reads the batch back message
// by message, so that both sides of a comparison go through the same encoders.
func (e *Executor) InventoryOf(ops iter.Seq[nft.Op]) (*Inventory, error) {
	inv := newInventory()
	r := &batchReader{inv: inv, hash: newCanonHash(), anon: map[uint32][]byte{}, anonSets: map[string]uint32{}}
	t := e.newTranslator(nil)
	t.b.chunkSize = batchChunkSize
	drain := func() {
		for _, chunk := range t.b.sealed {
			r.read(chunk)
		}
		t.b.sealed = t.b.sealed[:0]
	}
	i := 0
	for op := range ops {
		if err := t.op(&op); err != nil {
			return nil, fmt.Errorf("nftnetlink: inventory of operation %d %q: %w", i, e.opText(&op), err)
		}
		i++
		drain()
	}
	t.end(false)
	drain()
	r.read(t.b.buf)
	return inv, nil
}

// batchReader folds the messages of a batch into an inventory.
type batchReader struct {
	inv  *Inventory
	hash canonHash
	// anon holds the canonical contents of the anonymous sets of the batch by set
	// id, until the rule that uses them; anonSets maps their names to ids while
	// their elements arrive.
	anon     map[uint32][]byte
	anonSets map[string]uint32
	scratch  []byte
}

func (r *batchReader) read(buf []byte) {
	for len(buf) >= unix.NLMSG_HDRLEN+4 {
		n := int(binary.NativeEndian.Uint32(buf))
		if n < unix.NLMSG_HDRLEN+4 || n > len(buf) {
			return
		}
		typ := binary.NativeEndian.Uint16(buf[4:])
		if typ>>8 == unix.NFNL_SUBSYS_NFTABLES {
			r.message(int(typ&0xff), attrs(buf[unix.NLMSG_HDRLEN+4:n]))
		}
		buf = buf[(n+3)&^3:]
	}
}

func (r *batchReader) message(typ int, a map[uint16][]byte) {
	inv := r.inv
	switch typ {
	case unix.NFT_MSG_NEWTABLE:
		inv.Exists = true
	case unix.NFT_MSG_DELTABLE:
		*inv = *newInventory()
	case unix.NFT_MSG_NEWCHAIN:
		name := cstring(a[unix.NFTA_CHAIN_NAME])
		if inv.Chains[name] == nil {
			inv.Chains[name] = &InventoryChain{Def: r.hash.sum(canonChainDef(a))}
		}
	case unix.NFT_MSG_DELCHAIN:
		delete(inv.Chains, cstring(a[unix.NFTA_CHAIN_NAME]))
	case unix.NFT_MSG_DELRULE:
		// A flush: of one chain, or of the table.
		if name, ok := a[unix.NFTA_RULE_CHAIN]; ok {
			if c := inv.Chains[cstring(name)]; c != nil {
				c.Rules = nil
			}
			return
		}
		for _, c := range inv.Chains {
			c.Rules = nil
		}
	case unix.NFT_MSG_NEWRULE:
		c := inv.Chains[cstring(a[unix.NFTA_RULE_CHAIN])]
		if c == nil {
			return
		}
		r.scratch = appendCanonRule(r.scratch[:0], a[unix.NFTA_RULE_EXPRESSIONS], a[unix.NFTA_RULE_USERDATA], r.resolveBatch)
		c.Rules = append(c.Rules, r.hash.sum(r.scratch))
	case unix.NFT_MSG_NEWSET:
		r.newSet(a)
	case unix.NFT_MSG_DELSET:
		delete(inv.Sets, cstring(a[unix.NFTA_SET_NAME]))
	case unix.NFT_MSG_NEWSETELEM, unix.NFT_MSG_DELSETELEM:
		r.elements(typ == unix.NFT_MSG_NEWSETELEM, a)
	case unix.NFT_MSG_NEWOBJ:
		inv.Counters[cstring(a[unix.NFTA_OBJ_NAME])] = true
	case unix.NFT_MSG_DELOBJ:
		delete(inv.Counters, cstring(a[unix.NFTA_OBJ_NAME]))
	}
}

func (r *batchReader) newSet(a map[uint16][]byte) {
	name := cstring(a[unix.NFTA_SET_NAME])
	flags := be32(a[unix.NFTA_SET_FLAGS])
	if flags&unix.NFT_SET_ANONYMOUS != 0 {
		id := be32(a[unix.NFTA_SET_ID])
		r.anonSets[name] = id
		r.anon[id] = canonSetDef(a)
		return
	}
	if r.inv.Sets[name] != nil {
		return
	}
	s := &InventorySet{Map: flags&unix.NFT_SET_MAP != 0, Def: r.hash.sum(canonSetDef(a)),
		Dynamic: flags&dynamicSetFlags != 0}
	if !s.Dynamic {
		s.Elements = map[uint64]bool{}
	}
	r.inv.Sets[name] = s
}

func (r *batchReader) elements(add bool, a map[uint16][]byte) {
	if id, ok := a[unix.NFTA_SET_ELEM_LIST_SET_ID]; ok {
		// An anonymous set's elements: sorted into its canonical contents.
		key := be32(id)
		if def, ok := r.anon[key]; ok {
			r.anon[key] = appendCanonElements(def, a[unix.NFTA_SET_ELEM_LIST_ELEMENTS])
		}
		delete(r.anonSets, cstring(a[unix.NFTA_SET_ELEM_LIST_SET]))
		return
	}
	s := r.inv.Sets[cstring(a[unix.NFTA_SET_ELEM_LIST_SET])]
	if s == nil || s.Dynamic {
		return
	}
	list, ok := a[unix.NFTA_SET_ELEM_LIST_ELEMENTS]
	if !ok && !add {
		clear(s.Elements) // a flush
		return
	}
	elems, _ := splitAttrs(list)
	for _, e := range elems {
		d := r.hash.sum(appendCanonPicked(r.scratch[:0], attrs(e.data), elemTypes...))
		if add {
			s.Elements[d] = true
		} else {
			delete(s.Elements, d)
		}
	}
}

// resolveBatch names an anonymous set of the batch by its contents, and
// forgets it: an anonymous set is bound to the one rule that follows it.
func (r *batchReader) resolveBatch(lookup map[uint16][]byte) ([]byte, bool) {
	id, ok := lookup[unix.NFTA_LOOKUP_SET_ID]
	if !ok {
		return nil, false
	}
	contents, ok := r.anon[be32(id)]
	if ok {
		delete(r.anon, be32(id))
	}
	return contents, ok
}

// appendCanonElements appends the sorted canonical forms of a list of
// elements (an anonymous set's contents).
func appendCanonElements(dst, list []byte) []byte {
	elems, _ := splitAttrs(list)
	forms := make([][]byte, 0, len(elems))
	for _, e := range elems {
		forms = append(forms, appendCanonPicked(nil, attrs(e.data), elemTypes...))
	}
	slices.SortFunc(forms, compareBytes)
	dst = append(dst, '[')
	for _, f := range forms {
		dst = append(append(dst, f...), ';')
	}
	return append(dst, ']')
}

func be32(b []byte) uint32 {
	if len(b) != 4 {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}
