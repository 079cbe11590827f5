package nftnetlink

import (
	"fmt"
	"hash/maphash"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/nft"
	"github.com/kproxy/kproxy/internal/nft/nfttext"
)

// Attributes golang.org/x/sys/unix does not define (linux/netfilter/nf_tables.h).
const (
	nftaTableUserdata = 6
	nftaChainUserdata = 12
)

// setInfo is what element commands need to know about a set or map.
type setInfo struct {
	key   keyType
	data  *keyType
	flags uint32
	// adds counts the elements the batch being built adds to the set: the size
	// of its element map when the batch is read into an inventory
	// (translator.inventory), which growing by doubling would leave as garbage
	// again, at the peak of a full sync.
	adds int
}

// translator turns the operations of one transaction, typed (ops.go) or read from
// its text (command), into netlink messages.
type translator struct {
	b       *builder
	family  string // "ip" / "ip6"
	nfproto byte
	table   string
	// sets defined by this transaction; others are asked from the kernel.
	sets      map[string]*setInfo
	tableGone bool // the transaction deleted the table: no kernel lookups
	lookup    func(name string) (*setInfo, error)
	nextSetID uint32
	// pending coalesces consecutive element commands on one set into one message.
	pending *pendingElems
	// parser reads the command lines of a transaction's text.
	parser nfttext.CommandParser
	// at locates the line being translated, for error reports.
	at commandRef
	// rulePrefix is "add rule <family> <table> ", and rules caches the encoding
	// (everything after the chain attribute) of rule texts seen in this batch,
	// see cachedRule.
	rulePrefix string
	rules      map[string][]byte
	// seen holds the hashes of the rule texts met once (ruleSeen).
	seen     map[uint64]struct{}
	seenSeed maphash.Seed
	// ruleText holds the printed text of a typed rule, the rule cache's key,
	// reused rule after rule.
	ruleText []byte
	// Scratch buffers of element, reused element after element.
	fields    []nft.Field
	key, data []byte
}

type pendingElems struct {
	verb, set string
	msg, list int
	count     int
}

func (t *translator) newID() uint32 { t.nextSetID++; return t.nextSetID }

// command translates one line of tx.String(): parsed into a typed operation by
// internal/nft/nfttext, then written as RunOps writes it (op).
func (t *translator) command(line string) error {
	if t.cachedRule(line) {
		return nil
	}
	cmd, err := t.parser.Parse(line)
	if err != nil {
		return err
	}
	if fam := familyKeyword(cmd.Family); fam != t.family || cmd.Table != t.table {
		return fmt.Errorf("object of table %s %s, executor is for %s %s", fam, cmd.Table, t.family, t.table)
	}
	return t.op(&cmd.Op)
}

func familyKeyword(f nft.Family) string {
	if f == nft.IPv6 {
		return "ip6"
	}
	return "ip"
}

// nftObjectCounter is NFT_OBJECT_COUNTER (linux/netfilter/nf_tables.h).
const nftObjectCounter = 1

// newCounter adds (verb "add" or "create") the named counter with its values.
func (t *translator) newCounter(verb, name string, packets, bytes uint64) {
	b := t.b
	m := b.nftMsg(unix.NFT_MSG_NEWOBJ, createFlags(verb), t.nfproto)
	b.attrString(unix.NFTA_OBJ_TABLE, t.table)
	b.attrString(unix.NFTA_OBJ_NAME, name)
	b.attrU32(unix.NFTA_OBJ_TYPE, nftObjectCounter)
	data := b.beginNest(unix.NFTA_OBJ_DATA)
	b.attrU64(unix.NFTA_COUNTER_BYTES, bytes)
	b.attrU64(unix.NFTA_COUNTER_PACKETS, packets)
	b.endNest(data)
	b.endMsg(m)
}

func (t *translator) deleteCounter(name string) {
	b := t.b
	m := b.nftMsg(unix.NFT_MSG_DELOBJ, 0, t.nfproto)
	b.attrString(unix.NFTA_OBJ_TABLE, t.table)
	b.attrString(unix.NFTA_OBJ_NAME, name)
	b.attrU32(unix.NFTA_OBJ_TYPE, nftObjectCounter)
	b.endMsg(m)
}

func createFlags(verb string) uint16 {
	if verb == "create" {
		return unix.NLM_F_CREATE | unix.NLM_F_EXCL
	}
	return unix.NLM_F_CREATE
}

func commentUdata(s string) (udata, error) {
	if len(s) > knftables.CommentLengthMax {
		return nil, fmt.Errorf("comment longer than %d bytes", knftables.CommentLengthMax)
	}
	return udata(nil).str(0, s), nil
}

// newTable adds (verb "add" or "create") the table, with its comment's userdata.
func (t *translator) newTable(verb string, ud udata) {
	b := t.b
	m := b.nftMsg(unix.NFT_MSG_NEWTABLE, createFlags(verb), t.nfproto)
	b.attrString(unix.NFTA_TABLE_NAME, t.table)
	b.attrU32(unix.NFTA_TABLE_FLAGS, 0)
	if ud != nil {
		b.attr(nftaTableUserdata, ud)
	}
	b.endMsg(m)
}

// flushTable deletes every rule of the table.
func (t *translator) flushTable() {
	// NFTA_RULE_TABLE and NFTA_TABLE_NAME are both attribute 1.
	m := t.b.nftMsg(unix.NFT_MSG_DELRULE, 0, t.nfproto)
	t.b.attrString(unix.NFTA_TABLE_NAME, t.table)
	t.b.endMsg(m)
}

// deleteTable deletes the table: later element commands cannot refer to the
// kernel's sets.
func (t *translator) deleteTable() {
	t.sets = map[string]*setInfo{}
	t.tableGone = true
	m := t.b.nftMsg(unix.NFT_MSG_DELTABLE, 0, t.nfproto)
	t.b.attrString(unix.NFTA_TABLE_NAME, t.table)
	t.b.endMsg(m)
}

var hooks = map[string]uint32{"prerouting": 0, "input": 1, "forward": 2, "output": 3, "postrouting": 4}

// newChain adds (verb "add" or "create") a chain: a base chain when chainType is
// set (with hook, priority and, optionally, policy), with its comment's userdata.
func (t *translator) newChain(verb, name, chainType, hook, prio, policy string, ud udata) error {
	b := t.b
	m := b.nftMsg(unix.NFT_MSG_NEWCHAIN, createFlags(verb), t.nfproto)
	b.attrString(unix.NFTA_CHAIN_TABLE, t.table)
	b.attrString(unix.NFTA_CHAIN_NAME, name)
	if chainType != "" {
		switch chainType {
		case "filter", "nat", "route":
		default:
			return fmt.Errorf("unsupported chain type %q", chainType)
		}
		hooknum, ok := hooks[hook]
		if !ok {
			return fmt.Errorf("unsupported hook %q", hook)
		}
		p, err := knftables.ParsePriority(knftables.Family(t.family), prio)
		if err != nil {
			return fmt.Errorf("priority %q: %w", prio, err)
		}
		b.attrString(unix.NFTA_CHAIN_TYPE, chainType)
		n := b.beginNest(unix.NFTA_CHAIN_HOOK)
		b.attrU32(unix.NFTA_HOOK_HOOKNUM, hooknum)
		b.attrU32(unix.NFTA_HOOK_PRIORITY, uint32(int32(p)))
		b.endNest(n)
		switch policy {
		case "":
		case "accept":
			b.attrU32(unix.NFTA_CHAIN_POLICY, 1)
		case "drop":
			b.attrU32(unix.NFTA_CHAIN_POLICY, 0)
		default:
			return fmt.Errorf("unsupported policy %q", policy)
		}
	} else if policy != "" {
		return fmt.Errorf("policy on a regular chain")
	}
	if ud != nil {
		b.attr(nftaChainUserdata, ud)
	}
	b.endMsg(m)
	return nil
}

func (t *translator) flushChain(name string) {
	m := t.b.nftMsg(unix.NFT_MSG_DELRULE, 0, t.nfproto)
	t.b.attrString(unix.NFTA_RULE_TABLE, t.table)
	t.b.attrString(unix.NFTA_RULE_CHAIN, name)
	t.b.endMsg(m)
}

func (t *translator) deleteChain(name string) {
	m := t.b.nftMsg(unix.NFT_MSG_DELCHAIN, 0, t.nfproto)
	t.b.attrString(unix.NFTA_CHAIN_TABLE, t.table)
	t.b.attrString(unix.NFTA_CHAIN_NAME, name)
	t.b.endMsg(m)
}

// writeRule emits the anonymous sets of a compiled rule and the rule, appended to
// chain. It returns the rule message's encoding after the chain attribute (for
// cacheRule), valid until the builder grows.
func (t *translator) writeRule(chain string, r *compiledRule) ([]byte, error) {
	for _, a := range r.anon {
		if err := t.anonSet(a); err != nil {
			return nil, err
		}
	}
	b := t.b
	m := b.nftMsg(unix.NFT_MSG_NEWRULE, unix.NLM_F_CREATE|unix.NLM_F_APPEND, t.nfproto)
	b.attrString(unix.NFTA_RULE_TABLE, t.table)
	b.attrString(unix.NFTA_RULE_CHAIN, chain)
	encStart := len(b.buf)
	list := b.beginNest(unix.NFTA_RULE_EXPRESSIONS)
	for _, e := range r.exprs {
		data, err := expr.Marshal(t.nfproto, e)
		if err != nil {
			return nil, fmt.Errorf("marshal %T: %w", e, err)
		}
		n := b.beginNest(unix.NFTA_LIST_ELEM)
		b.buf = append(b.buf, data...)
		b.endNest(n)
	}
	b.endNest(list)
	if r.comment != "" {
		ud, err := commentUdata(r.comment)
		if err != nil {
			return nil, err
		}
		b.attr(unix.NFTA_RULE_USERDATA, ud)
	}
	b.endMsg(m)
	return b.buf[encStart:], nil
}

// anonSet emits an anonymous set and its elements, bound to the next rule by id.
func (t *translator) anonSet(a *anonSet) error {
	b := t.b
	flags := uint32(unix.NFT_SET_ANONYMOUS | unix.NFT_SET_CONSTANT)
	name := "__set%d"
	if a.interval {
		flags |= unix.NFT_SET_INTERVAL
	}
	if a.data != nil {
		flags |= unix.NFT_SET_MAP
		name = "__map%d"
	}
	m := b.nftMsg(unix.NFT_MSG_NEWSET, unix.NLM_F_CREATE, t.nfproto)
	b.attrString(unix.NFTA_SET_TABLE, t.table)
	b.attrString(unix.NFTA_SET_NAME, name)
	b.attrU32(unix.NFTA_SET_FLAGS, flags)
	b.attrU32(unix.NFTA_SET_KEY_TYPE, a.key.id())
	b.attrU32(unix.NFTA_SET_KEY_LEN, uint32(a.key.size()))
	if a.data != nil {
		b.attrU32(unix.NFTA_SET_DATA_TYPE, a.data.id())
		b.attrU32(unix.NFTA_SET_DATA_LEN, uint32(a.data.size()))
	}
	b.attrU32(unix.NFTA_SET_ID, a.id)
	d := b.beginNest(unix.NFTA_SET_DESC)
	b.attrU32(unix.NFTA_SET_DESC_SIZE, uint32(len(a.elems)))
	b.endNest(d)
	ud := udata(nil).u32(0, a.key.order())
	if a.data != nil {
		ud = ud.u32(1, a.data.order())
	}
	b.attr(unix.NFTA_SET_USERDATA, ud)
	b.endMsg(m)

	m = b.nftMsg(unix.NFT_MSG_NEWSETELEM, unix.NLM_F_CREATE, t.nfproto)
	b.attrString(unix.NFTA_SET_ELEM_LIST_TABLE, t.table)
	b.attrString(unix.NFTA_SET_ELEM_LIST_SET, name)
	b.attrU32(unix.NFTA_SET_ELEM_LIST_SET_ID, a.id)
	list := b.beginNest(unix.NFTA_SET_ELEM_LIST_ELEMENTS)
	for _, e := range a.elems {
		n := b.beginNest(unix.NFTA_LIST_ELEM)
		t.elemKey(e.key)
		if e.flags != 0 {
			b.attrU32(unix.NFTA_SET_ELEM_FLAGS, e.flags)
		}
		if e.open {
			b.attr(unix.NFTA_SET_ELEM_USERDATA, udata(nil).u32(1, 1))
		}
		if e.verdict != nil {
			t.elemVerdict(e.verdict)
		} else if e.data != nil {
			dn := b.beginNest(unix.NFTA_SET_ELEM_DATA)
			b.attr(unix.NFTA_DATA_VALUE, e.data)
			b.endNest(dn)
		}
		b.endNest(n)
	}
	b.endNest(list)
	b.endMsg(m)
	return nil
}

func (t *translator) elemKey(key []byte) {
	n := t.b.beginNest(unix.NFTA_SET_ELEM_KEY)
	t.b.attr(unix.NFTA_DATA_VALUE, key)
	t.b.endNest(n)
}

func (t *translator) elemVerdict(v *expr.Verdict) {
	b := t.b
	dn := b.beginNest(unix.NFTA_SET_ELEM_DATA)
	vn := b.beginNest(unix.NFTA_DATA_VERDICT)
	b.attrU32(unix.NFTA_VERDICT_CODE, uint32(int32(v.Kind)))
	if v.Chain != "" {
		b.attrString(unix.NFTA_VERDICT_CHAIN, v.Chain)
	}
	b.endNest(vn)
	b.endNest(dn)
}
