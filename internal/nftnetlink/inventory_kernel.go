package nftnetlink

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// ReadInventory reads the table from the kernel into an Inventory: one dump each
// of its chains, rules, sets and counters, and one of the elements of every set
// that is not dynamic (named, and the anonymous sets the rules use). A table that
// does not exist reads as an empty inventory with Exists false.
func (e *Executor) ReadInventory(ctx context.Context) (*Inventory, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sock, err := openSocket(e.opts.NetNSPath)
	if err != nil {
		return nil, fmt.Errorf("nftnetlink: %w", err)
	}
	defer sock.close()
	inv := newInventory()
	exists, err := tableExists(sock, e.nfproto, e.table)
	if err != nil || !exists {
		return inv, err
	}
	inv.Exists = true
	h := newCanonHash()
	var scratch []byte

	// Sets first: the rules' lookups of anonymous sets are resolved by name.
	anon := map[string][]byte{}
	var named []string
	err = dump(sock, unix.NFT_MSG_GETSET, e.nfproto, unix.NFTA_SET_TABLE, e.table, func(a map[uint16][]byte) {
		if cstring(a[unix.NFTA_SET_TABLE]) != e.table {
			return
		}
		name := cstring(a[unix.NFTA_SET_NAME])
		flags := be32(a[unix.NFTA_SET_FLAGS])
		if flags&unix.NFT_SET_ANONYMOUS != 0 {
			anon[name] = canonSetDef(a)
			return
		}
		s := &InventorySet{Map: flags&unix.NFT_SET_MAP != 0, Def: h.sum(canonSetDef(a)),
			Dynamic: flags&dynamicSetFlags != 0}
		if !s.Dynamic {
			s.Elements = map[uint64]bool{}
			named = append(named, name)
		}
		inv.Sets[name] = s
	})
	if err != nil {
		return nil, fmt.Errorf("nftnetlink: listing sets: %w", err)
	}
	for _, name := range named {
		s := inv.Sets[name]
		err := dumpElements(sock, e.nfproto, e.table, name, func(elem map[uint16][]byte) {
			s.Elements[h.sum(appendCanonPicked(scratch[:0], elem, elemTypes...))] = true
		})
		if err != nil {
			return nil, fmt.Errorf("nftnetlink: listing the elements of %s: %w", name, err)
		}
	}
	for name, def := range anon {
		var list []byte
		err := dumpElementLists(sock, e.nfproto, e.table, name, func(l []byte) { list = append(list, l...) })
		if err != nil {
			return nil, fmt.Errorf("nftnetlink: listing the elements of %s: %w", name, err)
		}
		anon[name] = appendCanonElements(def, list)
	}

	err = dump(sock, unix.NFT_MSG_GETCHAIN, e.nfproto, unix.NFTA_CHAIN_TABLE, e.table, func(a map[uint16][]byte) {
		if cstring(a[unix.NFTA_CHAIN_TABLE]) == e.table {
			inv.Chains[cstring(a[unix.NFTA_CHAIN_NAME])] = &InventoryChain{Def: h.sum(canonChainDef(a))}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("nftnetlink: listing chains: %w", err)
	}
	resolve := func(lookup map[uint16][]byte) ([]byte, bool) {
		name := cstring(lookup[unix.NFTA_LOOKUP_SET])
		if !strings.HasPrefix(name, "__") {
			return nil, false
		}
		contents, ok := anon[name]
		return contents, ok
	}
	err = dump(sock, unix.NFT_MSG_GETRULE, e.nfproto, unix.NFTA_RULE_TABLE, e.table, func(a map[uint16][]byte) {
		if cstring(a[unix.NFTA_RULE_TABLE]) != e.table {
			return
		}
		c := inv.Chains[cstring(a[unix.NFTA_RULE_CHAIN])]
		if c == nil {
			return
		}
		scratch = appendCanonRule(scratch[:0], a[unix.NFTA_RULE_EXPRESSIONS], a[unix.NFTA_RULE_USERDATA], resolve)
		c.Rules = append(c.Rules, h.sum(scratch))
	})
	if err != nil {
		return nil, fmt.Errorf("nftnetlink: listing rules: %w", err)
	}
	err = dump(sock, unix.NFT_MSG_GETOBJ, e.nfproto, unix.NFTA_OBJ_TABLE, e.table, func(a map[uint16][]byte) {
		if cstring(a[unix.NFTA_OBJ_TABLE]) == e.table && be32(a[unix.NFTA_OBJ_TYPE]) == nftObjectCounter {
			inv.Counters[cstring(a[unix.NFTA_OBJ_NAME])] = true
		}
	})
	if err != nil {
		return nil, fmt.Errorf("nftnetlink: listing counters: %w", err)
	}
	return inv, nil
}

// TableExists reports whether the table exists: one request, for a check that
// runs every second.
func (e *Executor) TableExists(ctx context.Context) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	sock, err := openSocket(e.opts.NetNSPath)
	if err != nil {
		return false, fmt.Errorf("nftnetlink: %w", err)
	}
	defer sock.close()
	return tableExists(sock, e.nfproto, e.table)
}

// Generation returns the ruleset generation of the network namespace: it
// changes with every nftables transaction committed there (anyone's, any table),
// so an unchanged generation means an unchanged table.
func (e *Executor) Generation(ctx context.Context) (uint32, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	sock, err := openSocket(e.opts.NetNSPath)
	if err != nil {
		return 0, fmt.Errorf("nftnetlink: %w", err)
	}
	defer sock.close()
	var gen uint32
	err = request(sock, unix.NFT_MSG_GETGEN, e.nfproto, nil, func(a map[uint16][]byte) { gen = be32(a[unix.NFTA_GEN_ID]) })
	if err != nil {
		return 0, fmt.Errorf("nftnetlink: reading the ruleset generation: %w", err)
	}
	return gen, nil
}

func tableExists(sock *socket, nfproto byte, table string) (bool, error) {
	found := false
	err := request(sock, unix.NFT_MSG_GETTABLE, nfproto, func(b *builder) { b.attrString(unix.NFTA_TABLE_NAME, table) },
		func(map[uint16][]byte) { found = true })
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("nftnetlink: reading table %s: %w", table, err)
	}
	return found, nil
}

// request sends one (non-dump) request and calls each with the attributes of its
// reply.
func request(sock *socket, msgType int, nfproto byte, fill func(*builder), each func(map[uint16][]byte)) error {
	b := &builder{}
	m := b.nftMsg(msgType, unix.NLM_F_ACK, nfproto)
	if fill != nil {
		fill(b)
	}
	b.endMsg(m)
	if err := sock.send(b.buf); err != nil {
		return err
	}
	for {
		replies, err := sock.recv(true)
		if err != nil {
			return err
		}
		for _, r := range replies {
			if r.seq != b.seq {
				continue
			}
			if r.typ == unix.NLMSG_ERROR {
				_, code := r.errno()
				return code
			}
			if len(r.data) > 4 {
				each(attrs(r.data[4:]))
			}
		}
	}
}

// dumpElements calls each with the attributes of every element of set.
func dumpElements(sock *socket, nfproto byte, table, set string, each func(map[uint16][]byte)) error {
	return dumpElementLists(sock, nfproto, table, set, func(list []byte) {
		elems, _ := splitAttrs(list)
		for _, el := range elems {
			each(attrs(el.data))
		}
	})
}

// dumpElementLists calls each with the NFTA_SET_ELEM_LIST_ELEMENTS of every
// message of a dump of set's elements.
func dumpElementLists(sock *socket, nfproto byte, table, set string, each func([]byte)) error {
	return dumpWith(sock, unix.NFT_MSG_GETSETELEM, nfproto, func(b *builder) {
		b.attrString(unix.NFTA_SET_ELEM_LIST_TABLE, table)
		b.attrString(unix.NFTA_SET_ELEM_LIST_SET, set)
	}, func(a map[uint16][]byte) {
		if l, ok := a[unix.NFTA_SET_ELEM_LIST_ELEMENTS]; ok {
			each(l)
		}
	})
}
