package nftnetlink

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/nft"
)

// The set and map encoders of the translator (add, create, flush and delete of sets,
// maps and their elements); script.go has the table, chain, rule and counter
// encoders, ops.go the dispatch of operations.

// setSpec is everything an "add set|map" command says about the set.
type setSpec struct {
	info                *setInfo
	timeout, gcInterval time.Duration
	size                uint64
	policy, comment     string
	typeofUdata         udata
	automerge           bool
}

// setType reads the datatypes of t into info.
func (info *setInfo) setType(t *nft.SetType, isMap bool) error {
	if isMap != (len(t.Data) > 0) {
		return fmt.Errorf("type with data for a set, or without for a map")
	}
	if isMap {
		d, err := keyTypeOf(t.Data)
		if err != nil {
			return err
		}
		info.data = &d
	}
	var err error
	info.key, err = keyTypeOf(t.Key)
	return err
}

func (t *translator) deleteSet(name string) {
	delete(t.sets, name)
	m := t.b.nftMsg(unix.NFT_MSG_DELSET, 0, t.nfproto)
	t.b.attrString(unix.NFTA_SET_TABLE, t.table)
	t.b.attrString(unix.NFTA_SET_NAME, name)
	t.b.endMsg(m)
}

func (t *translator) flushSet(name string) {
	m := t.b.nftMsg(unix.NFT_MSG_DELSETELEM, 0, t.nfproto)
	t.b.attrString(unix.NFTA_SET_ELEM_LIST_TABLE, t.table)
	t.b.attrString(unix.NFTA_SET_ELEM_LIST_SET, name)
	t.b.endMsg(m)
}

// newSet adds (verb "add" or "create") a set or map, and records it for the
// element commands that follow.
func (t *translator) newSet(verb, name string, isMap bool, sp *setSpec) error {
	b := t.b
	info := sp.info
	if len(sp.comment) > knftables.CommentLengthMax {
		return fmt.Errorf("comment longer than %d bytes", knftables.CommentLengthMax)
	}
	if len(info.key.fields) == 0 {
		return fmt.Errorf("set without type")
	}
	if info.key.isVerdict() {
		return fmt.Errorf("verdict keys are not supported")
	}
	if info.flags&unix.NFT_SET_INTERVAL != 0 && info.key.concat() {
		return fmt.Errorf("concatenated interval sets are not supported")
	}
	if isMap {
		info.flags |= unix.NFT_SET_MAP
	}
	m := b.nftMsg(unix.NFT_MSG_NEWSET, createFlags(verb), t.nfproto)
	b.attrString(unix.NFTA_SET_TABLE, t.table)
	b.attrString(unix.NFTA_SET_NAME, name)
	b.attrU32(unix.NFTA_SET_FLAGS, info.flags)
	b.attrU32(unix.NFTA_SET_KEY_TYPE, info.key.id())
	b.attrU32(unix.NFTA_SET_KEY_LEN, uint32(info.key.size()))
	if info.data != nil {
		b.attrU32(unix.NFTA_SET_DATA_TYPE, info.data.id())
		b.attrU32(unix.NFTA_SET_DATA_LEN, uint32(info.data.size()))
	}
	switch sp.policy {
	case "":
	case "performance":
		b.attrU32(unix.NFTA_SET_POLICY, unix.NFT_SET_POL_PERFORMANCE)
	case "memory":
		b.attrU32(unix.NFTA_SET_POLICY, unix.NFT_SET_POL_MEMORY)
	default:
		return fmt.Errorf("unsupported set policy %q", sp.policy)
	}
	b.attrU32(unix.NFTA_SET_ID, t.newID())
	if sp.timeout != 0 {
		b.attrU64(unix.NFTA_SET_TIMEOUT, uint64(sp.timeout.Milliseconds()))
	}
	if sp.gcInterval != 0 {
		b.attrU32(unix.NFTA_SET_GC_INTERVAL, uint32(sp.gcInterval.Milliseconds()))
	}
	if sp.size != 0 {
		d := b.beginNest(unix.NFTA_SET_DESC)
		b.attrU32(unix.NFTA_SET_DESC_SIZE, uint32(sp.size))
		b.endNest(d)
	}
	ud := udata(nil).u32(0, info.key.order())
	if info.data != nil {
		ud = ud.u32(1, info.data.order())
	}
	if sp.automerge {
		ud = ud.u32(2, 1)
	}
	if sp.typeofUdata != nil {
		if sp.automerge {
			return fmt.Errorf("auto-merge with typeof is not supported")
		}
		ud = sp.typeofUdata
	}
	if sp.comment != "" {
		ud = ud.str(7, sp.comment)
	}
	b.attr(unix.NFTA_SET_USERDATA, ud)
	b.endMsg(m)
	t.sets[name] = info
	return nil
}

// set returns what is known of a set, from this transaction or the kernel.
func (t *translator) set(name string) (*setInfo, error) {
	if s, ok := t.sets[name]; ok {
		return s, nil
	}
	if t.tableGone {
		return nil, fmt.Errorf("set %q does not exist", name)
	}
	s, err := t.lookup(name)
	if err != nil {
		return nil, fmt.Errorf("set %q: %w", name, err)
	}
	t.sets[name] = s
	return s, nil
}

func (t *translator) flushElems() {
	p := t.pending
	if p == nil {
		return
	}
	t.b.endNest(p.list)
	t.b.endMsg(p.msg)
	t.pending = nil
}

// maxElemsBytes bounds the element list of a coalesced message: a netlink
// attribute's length is 16 bits.
const maxElemsBytes = 60000

// element adds (verb "add" or "create") or deletes an element of the set name
// (described by info): key, and for a map value, a verdict or data. Consecutive
// element commands on one set share a message.
func (t *translator) element(verb, name string, info *setInfo, key nft.Elem, comment string, value nft.Elem) error {
	var data []byte
	verdict, isVerdict := value.Verdict()
	switch {
	case !value.IsZero() && info.data == nil:
		return fmt.Errorf("value for an element of set %q", name)
	case value.IsZero() && info.data != nil && verb != "delete":
		return fmt.Errorf("map element without value")
	case isVerdict != (info.data != nil && info.data.isVerdict()) && !value.IsZero():
		return fmt.Errorf("value %q of an element of map %q", value.String(), name)
	case !value.IsZero() && !isVerdict:
		var err error
		if data, err = appendKey(t.data[:0], *info.data, value, &t.fields); err != nil {
			return err
		}
		t.data = data
	}
	if info.flags&unix.NFT_SET_INTERVAL != 0 {
		// nft merges interval elements with the set's current content (and adds
		// a leading end element to an empty set); reproducing that needs the
		// set's elements, which the renderer never needs.
		return fmt.Errorf("elements of interval sets are not supported")
	}
	k, err := appendKey(t.key[:0], info.key, key, &t.fields)
	if err != nil {
		return err
	}
	t.key = k
	if verb != "delete" {
		info.adds++
	}

	b := t.b
	if p := t.pending; p == nil || p.verb != verb || p.set != name || len(b.buf)-p.list > maxElemsBytes {
		t.flushElems()
		b.markCommand(t.at)
		typ, flags := unix.NFT_MSG_NEWSETELEM, createFlags(verb)
		if verb == "delete" {
			typ, flags = unix.NFT_MSG_DELSETELEM, 0
		}
		m := b.nftMsg(typ, flags, t.nfproto)
		b.attrString(unix.NFTA_SET_ELEM_LIST_TABLE, t.table)
		b.attrString(unix.NFTA_SET_ELEM_LIST_SET, name)
		t.pending = &pendingElems{verb: verb, set: name, msg: m, list: b.beginNest(unix.NFTA_SET_ELEM_LIST_ELEMENTS)}
	}
	n := b.beginNest(unix.NFTA_LIST_ELEM)
	t.elemKey(k)
	if verb != "delete" {
		if isVerdict {
			v, err := verdictExpr(verdict)
			if err != nil {
				return err
			}
			t.elemVerdict(v)
		} else if data != nil {
			dn := b.beginNest(unix.NFTA_SET_ELEM_DATA)
			b.attr(unix.NFTA_DATA_VALUE, data)
			b.endNest(dn)
		}
		if comment != "" {
			ud, err := commentUdata(comment)
			if err != nil {
				return err
			}
			b.attr(unix.NFTA_SET_ELEM_USERDATA, ud)
		}
	}
	b.endNest(n)
	t.pending.count++
	return nil
}
