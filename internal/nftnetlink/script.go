package nftnetlink

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"
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
}

// translator turns the command lines of one transaction into netlink messages.
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
	// toks is the token buffer of the line being translated, reused line after line.
	toks []token
	// at locates the line being translated, for error reports.
	at commandRef
	// rulePrefix is "add rule <family> <table> ", and rules caches the encoding
	// (everything after the chain attribute) of rule texts seen in this batch,
	// see cachedRule.
	rulePrefix string
	rules      map[string][]byte
	// line is the command being translated.
	line string
	// Scratch buffers of elementCmd, reused element after element.
	kparts, dparts []string
	key, data      []byte
}

type pendingElems struct {
	verb, set string
	msg, list int
	count     int
}

func (t *translator) newID() uint32 { t.nextSetID++; return t.nextSetID }

// command translates one line of tx.String().
func (t *translator) command(line string) error {
	if t.cachedRule(line) {
		return nil
	}
	t.line = line
	toks, err := appendTokens(t.toks[:0], line)
	if err != nil {
		return err
	}
	t.toks = toks
	c := &cursor{toks: toks}
	verb := c.next()
	kind := c.next()
	fam := c.next()
	table := c.next()
	if fam != t.family || table != t.table {
		return fmt.Errorf("object of table %s %s, executor is for %s %s", fam, table, t.family, t.table)
	}
	if kind != "element" {
		t.flushElems()
		t.b.markCommand(t.at)
	}
	switch verb {
	case "add", "create", "delete", "flush":
	default:
		return fmt.Errorf("unsupported verb %q", verb)
	}
	switch kind {
	case "table":
		return t.tableCmd(verb, c)
	case "chain":
		return t.chainCmd(verb, c)
	case "rule":
		return t.ruleCmd(verb, c)
	case "set", "map":
		return t.setCmd(verb, kind == "map", c)
	case "element":
		return t.elementCmd(verb, c, line)
	case "counter":
		return t.counterCmd(verb, c)
	}
	return fmt.Errorf("unsupported object %q", kind)
}

// nftObjectCounter is NFT_OBJECT_COUNTER (linux/netfilter/nf_tables.h).
const nftObjectCounter = 1

// counterCmd translates "add|create counter <family> <table> NAME [{ packets N bytes
// M ; }]" and "delete counter <family> <table> NAME" into NFT_MSG_NEWOBJ /
// NFT_MSG_DELOBJ, with the attributes nft sends. Adding an existing counter keeps
// its value.
func (t *translator) counterCmd(verb string, c *cursor) error {
	b := t.b
	name, err := c.quotedOrWord("counter name")
	if err != nil {
		return err
	}
	if name == "handle" {
		return fmt.Errorf("counters by handle are not supported")
	}
	switch verb {
	case "delete":
		if !c.done() {
			return fmt.Errorf("unexpected %q", c.describeNext())
		}
		m := b.nftMsg(unix.NFT_MSG_DELOBJ, 0, t.nfproto)
		b.attrString(unix.NFTA_OBJ_TABLE, t.table)
		b.attrString(unix.NFTA_OBJ_NAME, name)
		b.attrU32(unix.NFTA_OBJ_TYPE, nftObjectCounter)
		b.endMsg(m)
		return nil
	case "flush":
		return fmt.Errorf("flush counter is not supported")
	}
	props, err := body(c)
	if err != nil {
		return err
	}
	var packets, bytes uint64
	for _, p := range props {
		w := texts(p)
		if len(w) != 4 || w[0] != "packets" || w[2] != "bytes" {
			return fmt.Errorf("unsupported counter property %q", strings.Join(w, " "))
		}
		if packets, err = strconv.ParseUint(w[1], 10, 64); err != nil {
			return fmt.Errorf("counter packets %q: %w", w[1], err)
		}
		if bytes, err = strconv.ParseUint(w[3], 10, 64); err != nil {
			return fmt.Errorf("counter bytes %q: %w", w[3], err)
		}
	}
	m := b.nftMsg(unix.NFT_MSG_NEWOBJ, createFlags(verb), t.nfproto)
	b.attrString(unix.NFTA_OBJ_TABLE, t.table)
	b.attrString(unix.NFTA_OBJ_NAME, name)
	b.attrU32(unix.NFTA_OBJ_TYPE, nftObjectCounter)
	data := b.beginNest(unix.NFTA_OBJ_DATA)
	b.attrU64(unix.NFTA_COUNTER_BYTES, bytes)
	b.attrU64(unix.NFTA_COUNTER_PACKETS, packets)
	b.endNest(data)
	b.endMsg(m)
	return nil
}

func createFlags(verb string) uint16 {
	if verb == "create" {
		return unix.NLM_F_CREATE | unix.NLM_F_EXCL
	}
	return unix.NLM_F_CREATE
}

// body parses "{ k v ; k v ; }" into ordered (key, values) pairs.
func body(c *cursor) ([][]token, error) {
	if c.done() {
		return nil, nil
	}
	if err := c.expect("{"); err != nil {
		return nil, err
	}
	var out [][]token
	var cur []token
	for {
		if c.done() {
			return nil, fmt.Errorf("unterminated { }")
		}
		tk := c.toks[c.pos]
		c.pos++
		if !tk.quoted && tk.text == "}" {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			if !c.done() {
				return nil, fmt.Errorf("unexpected %q after }", c.describeNext())
			}
			return out, nil
		}
		if !tk.quoted && tk.text == ";" {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, tk)
	}
}

func texts(ts []token) []string {
	out := make([]string, len(ts))
	for i, tk := range ts {
		out[i] = tk.text
	}
	return out
}

func commentUdata(s string) (udata, error) {
	if len(s) > knftables.CommentLengthMax {
		return nil, fmt.Errorf("comment longer than %d bytes", knftables.CommentLengthMax)
	}
	return udata(nil).str(0, s), nil
}

func (t *translator) tableCmd(verb string, c *cursor) error {
	b := t.b
	if verb == "delete" || verb == "flush" {
		if !c.done() {
			return fmt.Errorf("unsupported %s table form", verb)
		}
		// NFTA_RULE_TABLE and NFTA_TABLE_NAME are both attribute 1.
		typ := unix.NFT_MSG_DELTABLE
		if verb == "flush" {
			typ = unix.NFT_MSG_DELRULE
		} else {
			t.sets = map[string]*setInfo{}
			t.tableGone = true
		}
		m := b.nftMsg(typ, 0, t.nfproto)
		b.attrString(unix.NFTA_TABLE_NAME, t.table)
		b.endMsg(m)
		return nil
	}
	props, err := body(c)
	if err != nil {
		return err
	}
	var ud udata
	for _, p := range props {
		switch {
		case len(p) == 2 && p[0].text == "comment":
			if ud, err = commentUdata(p[1].text); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unsupported table property %q", strings.Join(texts(p), " "))
		}
	}
	m := b.nftMsg(unix.NFT_MSG_NEWTABLE, createFlags(verb), t.nfproto)
	b.attrString(unix.NFTA_TABLE_NAME, t.table)
	b.attrU32(unix.NFTA_TABLE_FLAGS, 0)
	if ud != nil {
		b.attr(nftaTableUserdata, ud)
	}
	b.endMsg(m)
	return nil
}

var hooks = map[string]uint32{"prerouting": 0, "input": 1, "forward": 2, "output": 3, "postrouting": 4}

func (t *translator) chainCmd(verb string, c *cursor) error {
	b := t.b
	name, err := c.quotedOrWord("chain name")
	if err != nil {
		return err
	}
	if name == "handle" {
		return fmt.Errorf("chains by handle are not supported")
	}
	switch verb {
	case "delete", "flush":
		if !c.done() {
			return fmt.Errorf("unexpected %q", c.describeNext())
		}
		if verb == "flush" {
			m := b.nftMsg(unix.NFT_MSG_DELRULE, 0, t.nfproto)
			b.attrString(unix.NFTA_RULE_TABLE, t.table)
			b.attrString(unix.NFTA_RULE_CHAIN, name)
			b.endMsg(m)
			return nil
		}
		m := b.nftMsg(unix.NFT_MSG_DELCHAIN, 0, t.nfproto)
		b.attrString(unix.NFTA_CHAIN_TABLE, t.table)
		b.attrString(unix.NFTA_CHAIN_NAME, name)
		b.endMsg(m)
		return nil
	}
	props, err := body(c)
	if err != nil {
		return err
	}
	var ud udata
	var chainType, hook, prio, policy string
	for _, p := range props {
		w := texts(p)
		switch {
		case len(w) == 6 && w[0] == "type" && w[2] == "hook" && w[4] == "priority":
			chainType, hook, prio = w[1], w[3], w[5]
		case len(w) == 2 && w[0] == "policy":
			policy = w[1]
		case len(w) == 2 && w[0] == "comment":
			if ud, err = commentUdata(p[1].text); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unsupported chain property %q", strings.Join(w, " "))
		}
	}
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

func (t *translator) ruleCmd(verb string, c *cursor) error {
	if verb != "add" {
		return fmt.Errorf("%s rule is not supported", verb)
	}
	chain, err := c.quotedOrWord("chain name")
	if err != nil {
		return err
	}
	if p := c.peek(); p == "index" || p == "handle" || p == "position" {
		return fmt.Errorf("rules by %s are not supported", p)
	}
	r, err := compileRule(t.family, c.toks[c.pos:], t.newID)
	if err != nil {
		return err
	}
	cacheable := len(r.anon) == 0
	for _, a := range r.anon {
		if err := t.anonSet(a); err != nil {
			return err
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
			return fmt.Errorf("marshal %T: %w", e, err)
		}
		n := b.beginNest(unix.NFTA_LIST_ELEM)
		b.buf = append(b.buf, data...)
		b.endNest(n)
	}
	b.endNest(list)
	if r.comment != "" {
		ud, err := commentUdata(r.comment)
		if err != nil {
			return err
		}
		b.attr(unix.NFTA_RULE_USERDATA, ud)
	}
	if cacheable {
		t.cacheRule(t.line, b.buf[encStart:])
	}
	b.endMsg(m)
	return nil
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

func (t *translator) setCmd(verb string, isMap bool, c *cursor) error {
	b := t.b
	name, err := c.quotedOrWord("set name")
	if err != nil {
		return err
	}
	if name == "handle" {
		return fmt.Errorf("sets by handle are not supported")
	}
	switch verb {
	case "delete":
		delete(t.sets, name)
		m := b.nftMsg(unix.NFT_MSG_DELSET, 0, t.nfproto)
		b.attrString(unix.NFTA_SET_TABLE, t.table)
		b.attrString(unix.NFTA_SET_NAME, name)
		b.endMsg(m)
		return nil
	case "flush":
		m := b.nftMsg(unix.NFT_MSG_DELSETELEM, 0, t.nfproto)
		b.attrString(unix.NFTA_SET_ELEM_LIST_TABLE, t.table)
		b.attrString(unix.NFTA_SET_ELEM_LIST_SET, name)
		b.endMsg(m)
		return nil
	}
	props, err := body(c)
	if err != nil {
		return err
	}
	info := &setInfo{}
	var timeout, gcInterval time.Duration
	var size uint64
	var policy string
	var comment string
	var typeofUdata udata
	automerge := false
	for _, p := range props {
		w := texts(p)
		switch {
		case len(w) >= 2 && w[0] == "typeof":
			if info.key, info.data, typeofUdata, err = parseTypeof(w[1:], isMap); err != nil {
				return err
			}
		case len(w) >= 2 && w[0] == "type":
			typ := w[1:]
			if isMap {
				i := indexOf(typ, ":")
				if i < 0 {
					return fmt.Errorf("map type without \":\"")
				}
				d, err := parseKeyType(typ[i+1:])
				if err != nil {
					return err
				}
				info.data = &d
				typ = typ[:i]
			}
			if info.key, err = parseKeyType(typ); err != nil {
				return err
			}
		case len(w) == 2 && w[0] == "flags":
			for _, f := range strings.Split(w[1], ",") {
				switch f {
				case "constant":
					info.flags |= unix.NFT_SET_CONSTANT
				case "interval":
					info.flags |= unix.NFT_SET_INTERVAL
				case "timeout":
					info.flags |= unix.NFT_SET_TIMEOUT
				case "dynamic":
					info.flags |= unix.NFT_SET_EVAL
				default:
					return fmt.Errorf("unsupported set flag %q", f)
				}
			}
		case len(w) == 2 && (w[0] == "timeout" || w[0] == "gc-interval"):
			d, err := time.ParseDuration(w[1])
			if err != nil {
				return fmt.Errorf("bad %s %q", w[0], w[1])
			}
			if w[0] == "timeout" {
				timeout = d
				info.flags |= unix.NFT_SET_TIMEOUT
			} else {
				gcInterval = d
			}
		case len(w) == 2 && w[0] == "size":
			if size, err = strconv.ParseUint(w[1], 10, 32); err != nil {
				return fmt.Errorf("bad size %q", w[1])
			}
		case len(w) == 2 && w[0] == "policy":
			policy = w[1]
		case len(w) == 1 && w[0] == "auto-merge":
			automerge = true
		case len(w) == 2 && w[0] == "comment":
			comment = w[1]
			if len(comment) > knftables.CommentLengthMax {
				return fmt.Errorf("comment longer than %d bytes", knftables.CommentLengthMax)
			}
		default:
			return fmt.Errorf("unsupported set property %q", strings.Join(w, " "))
		}
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
	switch policy {
	case "":
	case "performance":
		b.attrU32(unix.NFTA_SET_POLICY, unix.NFT_SET_POL_PERFORMANCE)
	case "memory":
		b.attrU32(unix.NFTA_SET_POLICY, unix.NFT_SET_POL_MEMORY)
	default:
		return fmt.Errorf("unsupported set policy %q", policy)
	}
	b.attrU32(unix.NFTA_SET_ID, t.newID())
	if timeout != 0 {
		b.attrU64(unix.NFTA_SET_TIMEOUT, uint64(timeout.Milliseconds()))
	}
	if gcInterval != 0 {
		b.attrU32(unix.NFTA_SET_GC_INTERVAL, uint32(gcInterval.Milliseconds()))
	}
	if size != 0 {
		d := b.beginNest(unix.NFTA_SET_DESC)
		b.attrU32(unix.NFTA_SET_DESC_SIZE, uint32(size))
		b.endNest(d)
	}
	ud := udata(nil).u32(0, info.key.order())
	if info.data != nil {
		ud = ud.u32(1, info.data.order())
	}
	if automerge {
		ud = ud.u32(2, 1)
	}
	if typeofUdata != nil {
		if automerge {
			return fmt.Errorf("auto-merge with typeof is not supported")
		}
		ud = typeofUdata
	}
	if comment != "" {
		ud = ud.str(7, comment)
	}
	b.attr(unix.NFTA_SET_USERDATA, ud)
	b.endMsg(m)
	t.sets[name] = info
	return nil
}

func indexOf(ws []string, w string) int {
	for i, x := range ws {
		if x == w {
			return i
		}
	}
	return -1
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

func (t *translator) elementCmd(verb string, c *cursor, line string) error {
	if verb == "flush" {
		return fmt.Errorf("flush element is not supported")
	}
	name, err := c.quotedOrWord("set name")
	if err != nil {
		return err
	}
	info, err := t.set(name)
	if err != nil {
		return err
	}
	if err := c.expect("{"); err != nil {
		return err
	}
	kparts := t.kparts[:0]
	for {
		kparts = append(kparts, c.next())
		if !c.accept(".") {
			break
		}
	}
	var comment string
	if c.accept("comment") {
		if comment, err = c.quotedOrWord("comment"); err != nil {
			return err
		}
	}
	var verdict *expr.Verdict
	var data []byte
	if c.accept(":") {
		if info.data == nil {
			return fmt.Errorf("value for an element of set %q", name)
		}
		if info.data.isVerdict() {
			if verdict, err = parseVerdict(c); err != nil {
				return err
			}
		} else {
			dparts := t.dparts[:0]
			for {
				dparts = append(dparts, c.next())
				if !c.accept(".") {
					break
				}
			}
			t.dparts = dparts
			if data, err = appendKey(t.data[:0], *info.data, dparts); err != nil {
				return err
			}
			t.data = data
		}
	} else if info.data != nil && verb != "delete" {
		return fmt.Errorf("map element without value")
	}
	if err := c.expect("}"); err != nil {
		return err
	}
	if !c.done() {
		return fmt.Errorf("unexpected %q", c.describeNext())
	}
	if info.flags&unix.NFT_SET_INTERVAL != 0 {
		// nft merges interval elements with the set's current content (and adds
		// a leading end element to an empty set); reproducing that needs the
		// set's elements, which the renderer never needs.
		return fmt.Errorf("elements of interval sets are not supported")
	}
	t.kparts = kparts
	k, err := appendKey(t.key[:0], info.key, kparts)
	if err != nil {
		return err
	}
	t.key = k
	keys := [1]anonElem{{key: k}}

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
	for i, k := range keys {
		n := b.beginNest(unix.NFTA_LIST_ELEM)
		t.elemKey(k.key)
		if k.flags != 0 {
			b.attrU32(unix.NFTA_SET_ELEM_FLAGS, k.flags)
		}
		if verb != "delete" && i == 0 {
			if verdict != nil {
				t.elemVerdict(verdict)
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
	}
	t.pending.count++
	return nil
}
