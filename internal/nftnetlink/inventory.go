package nftnetlink

import (
	"encoding/binary"
	"fmt"
	"iter"

	"golang.org/x/sys/unix"

	"github.com/kproxy/kproxy/internal/nft"
)

// An Inventory is what one table holds, reduced to the canonical hashes of
// canon.go: one number per chain and set definition, per rule and per element.
// The inventory of what kproxy wrote (InventoryOf) and the inventory of what the
// kernel holds (ReadInventory) are equal exactly when nobody changed the table in
// between; CompareInventories lists how they differ.
type Inventory struct {
	// Exists: the table exists.
	Exists bool
	// Chains by name.
	Chains map[string]*InventoryChain
	// Sets holds the named sets and maps, by name.
	Sets map[string]*InventorySet
	// Counters are the named counters.
	Counters map[string]bool
	// setTypes are the types of its named sets, with which ApplyToInventory
	// encodes the element operations of later syncs.
	setTypes map[string]*setInfo
}

// InventoryChain is one chain.
type InventoryChain struct {
	// Def is the hash of its definition (base chain hook, type, priority, policy;
	// comment).
	Def uint64
	// Rules are the hashes of its rules, in order.
	Rules []uint64
}

// InventorySet is one named set or map.
type InventorySet struct {
	Map bool
	// Def is the hash of its definition (type, flags, timeout, comment).
	Def uint64
	// Dynamic sets are filled by the packet path (session affinity): their
	// elements are not kproxy's to compare, and Elements is nil.
	Dynamic bool
	// Elements maps the hash of each element's key to the hash of the whole
	// element (key, value, flags, comment).
	Elements map[uint64]uint64
}

func newInventory() *Inventory {
	return &Inventory{Chains: map[string]*InventoryChain{}, Sets: map[string]*InventorySet{}, Counters: map[string]bool{},
		setTypes: map[string]*setInfo{}}
}

// dynamicSetFlags mark a set the packet path writes into.
const dynamicSetFlags = unix.NFT_SET_EVAL | unix.NFT_SET_TIMEOUT

// newInventorySet returns the inventory entry of the set a NEWSET message (or a
// dump of one) defines.
func newInventorySet(msg []byte) *InventorySet {
	flags, _ := attrGet(msg, unix.NFTA_SET_FLAGS)
	s := &InventorySet{Map: be32(flags)&unix.NFT_SET_MAP != 0, Def: setDefHash(msg), Dynamic: be32(flags)&dynamicSetFlags != 0}
	if !s.Dynamic {
		s.Elements = map[uint64]uint64{}
	}
	return s
}

// InventoryOf returns the inventory of the table the typed operations ops leave
// behind when applied to an empty kernel (a full sync, render/nftables.FullOps):
// ApplyToInventory on an empty inventory.
func (e *Executor) InventoryOf(ops iter.Seq[nft.Op]) (*Inventory, error) {
	inv := newInventory()
	if err := e.ApplyToInventory(inv, ops); err != nil {
		return nil, err
	}
	return inv, nil
}

// ApplyToInventory updates inv, the inventory of a table, with what the typed
// operations ops (a partial sync, render/nftables.Plan.Ops) change in it. It
// encodes ops as RunOps would, without a socket (element operations on sets the
// operations do not define take their types from inv), and reads the batch back
// message by message as it is written (a chunk at a time, reusing the chunks), so
// that both sides of a comparison go through the same encoders. On error inv is
// partly updated and must be rebuilt.
func (e *Executor) ApplyToInventory(inv *Inventory, ops iter.Seq[nft.Op]) error {
	r := &batchReader{inv: inv, anon: map[uint32]uint64{}}
	t := e.newTranslator(nil)
	t.sets = inv.setTypes
	t.lookup = func(name string) (*setInfo, error) { return nil, fmt.Errorf("not defined in the inventory") }
	drain := func() {
		for _, chunk := range t.b.sealed {
			r.read(chunk)
			t.b.free = append(t.b.free, chunk)
		}
		t.b.sealed = t.b.sealed[:0]
	}
	i := 0
	for op := range ops {
		if err := t.op(&op); err != nil {
			return fmt.Errorf("nftnetlink: inventory of operation %d %q: %w", i, e.opText(&op), err)
		}
		i++
		drain()
	}
	t.end(false)
	drain()
	r.read(t.b.buf)
	// A deleted table resets the translator's sets.
	inv.setTypes = t.sets
	return nil
}

// batchReader folds the messages of a batch into an inventory.
type batchReader struct {
	inv *Inventory
	// anon holds the hashes of the anonymous sets of the batch by set id: their
	// definitions until their elements arrive, then their contents, until the
	// rule that uses them.
	anon    map[uint32]uint64
	scratch []uint64
	// sizes, when set, are the sets of the translator that built the batch:
	// their element counts size the element maps of the sets the batch defines.
	sizes map[string]*setInfo
}

func (r *batchReader) read(buf []byte) {
	for len(buf) >= unix.NLMSG_HDRLEN+4 {
		n := int(binary.NativeEndian.Uint32(buf))
		if n < unix.NLMSG_HDRLEN+4 || n > len(buf) {
			return
		}
		typ := binary.NativeEndian.Uint16(buf[4:])
		if typ>>8 == unix.NFNL_SUBSYS_NFTABLES {
			r.message(int(typ&0xff), buf[unix.NLMSG_HDRLEN+4:n])
		}
		buf = buf[min((n+3)&^3, len(buf)):]
	}
}

// str is a string attribute of msg.
func str(msg []byte, typ uint16) string {
	v, _ := attrGet(msg, typ)
	return cstring(v)
}

// attrName is str without the string: for map lookups (m[string(attrName(...))]
// allocates nothing), as a full sync's batch names a chain or set in each of its
// ~140,000 messages at 10,000 Services.
func attrName(msg []byte, typ uint16) []byte {
	v, _ := attrGet(msg, typ)
	return cstringBytes(v)
}

func (r *batchReader) message(typ int, msg []byte) {
	inv := r.inv
	switch typ {
	case unix.NFT_MSG_NEWTABLE:
		inv.Exists = true
	case unix.NFT_MSG_DELTABLE:
		// The translator resets the set types itself (ApplyToInventory).
		inv.Exists = false
		clear(inv.Chains)
		clear(inv.Sets)
		clear(inv.Counters)
	case unix.NFT_MSG_NEWCHAIN:
		name := str(msg, unix.NFTA_CHAIN_NAME)
		if inv.Chains[name] == nil {
			inv.Chains[name] = &InventoryChain{Def: chainDefHash(msg)}
		}
	case unix.NFT_MSG_DELCHAIN:
		delete(inv.Chains, str(msg, unix.NFTA_CHAIN_NAME))
	case unix.NFT_MSG_DELRULE:
		// A flush: of one chain, or of the table.
		if _, ok := attrGet(msg, unix.NFTA_RULE_CHAIN); ok {
			if c := inv.Chains[string(attrName(msg, unix.NFTA_RULE_CHAIN))]; c != nil {
				c.Rules = nil
			}
			return
		}
		for _, c := range inv.Chains {
			c.Rules = nil
		}
	case unix.NFT_MSG_NEWRULE:
		c := inv.Chains[string(attrName(msg, unix.NFTA_RULE_CHAIN))]
		if c == nil {
			return
		}
		exprs, _ := attrGet(msg, unix.NFTA_RULE_EXPRESSIONS)
		ud, _ := attrGet(msg, unix.NFTA_RULE_USERDATA)
		c.Rules = append(c.Rules, ruleHash(exprs, ud, r.resolve))
	case unix.NFT_MSG_NEWSET:
		flags, _ := attrGet(msg, unix.NFTA_SET_FLAGS)
		if be32(flags)&unix.NFT_SET_ANONYMOUS != 0 {
			id, _ := attrGet(msg, unix.NFTA_SET_ID)
			r.anon[be32(id)] = setDefHash(msg)
			return
		}
		if name := str(msg, unix.NFTA_SET_NAME); inv.Sets[name] == nil {
			s := newInventorySet(msg)
			if info := r.sizes[name]; info != nil && s.Elements != nil && info.adds > 0 {
				s.Elements = make(map[uint64]uint64, info.adds)
			}
			inv.Sets[name] = s
		}
	case unix.NFT_MSG_DELSET:
		delete(inv.Sets, str(msg, unix.NFTA_SET_NAME))
	case unix.NFT_MSG_NEWSETELEM, unix.NFT_MSG_DELSETELEM:
		r.elements(typ == unix.NFT_MSG_NEWSETELEM, msg)
	case unix.NFT_MSG_NEWOBJ:
		inv.Counters[str(msg, unix.NFTA_OBJ_NAME)] = true
	case unix.NFT_MSG_DELOBJ:
		delete(inv.Counters, str(msg, unix.NFTA_OBJ_NAME))
	}
}

func (r *batchReader) elements(add bool, msg []byte) {
	list, hasList := attrGet(msg, unix.NFTA_SET_ELEM_LIST_ELEMENTS)
	if id, ok := attrGet(msg, unix.NFTA_SET_ELEM_LIST_SET_ID); ok {
		// An anonymous set's elements (all in one message): its contents.
		if def, ok := r.anon[be32(id)]; ok {
			r.anon[be32(id)] = elementsHash(def, list, &r.scratch)
		}
		return
	}
	s := r.inv.Sets[string(attrName(msg, unix.NFTA_SET_ELEM_LIST_SET))]
	if s == nil || s.Dynamic {
		return
	}
	if !hasList && !add {
		clear(s.Elements) // a flush
		return
	}
	for b := list; len(b) > 0; {
		_, e, rest, ok := nextAttr(b)
		if !ok {
			break
		}
		b = rest
		if add {
			s.Elements[elemKeyHash(e)] = elemHash(e)
		} else {
			delete(s.Elements, elemKeyHash(e))
		}
	}
}

// resolve returns the contents of the anonymous set of the batch a lookup
// names by id, and forgets it: an anonymous set is bound to the one rule that
// follows it.
func (r *batchReader) resolve(lookup []byte) (uint64, bool) {
	id, ok := attrGet(lookup, unix.NFTA_LOOKUP_SET_ID)
	if !ok {
		return 0, false
	}
	h, ok := r.anon[be32(id)]
	if ok {
		delete(r.anon, be32(id))
	}
	return h, ok
}

func be32(b []byte) uint32 {
	if len(b) != 4 {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}
