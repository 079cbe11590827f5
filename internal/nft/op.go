package nft

import (
	"iter"
	"strconv"
	"time"
)

// OpKind is the kind of an Op.
type OpKind uint8

const (
	AddTable OpKind = iota + 1
	DeleteTable
	AddChain
	FlushChain
	DeleteChain
	AddSet // a set, or a map with IsMap
	FlushSet
	DeleteSet
	AddRule
	AddElement
	DeleteElement // by key: Value and Comment are not written
	AddCounter
	DeleteCounter
	FlushTable
)

// Op is one operation of a transaction on the table: a full sync is a stream of
// them, and so is a partial sync's delta, which a writer encodes (internal/nftnetlink) or prints (AppendText) without
// knftables objects in between. Ops are flat values, passed by value: a full sync
// at 10,000 Services is ~10^5 of them, and they point to the rules they add
// rather than copy them (only a base chain's Hook is allocated).
type Op struct {
	Kind OpKind
	// Create makes an add fail when the object exists (nft's "create").
	Create bool
	// Name is the chain, set, map or counter operated on; for AddRule the chain,
	// for AddElement the set or map.
	Name  string
	IsMap bool
	// Comment of the table, chain, set or element added.
	Comment string
	// Hook makes AddChain's chain a base chain.
	Hook *Hook
	// Type is AddSet's key (and, for a map, data) type; the renderer's containers
	// hold it.
	Type *SetType
	// Timeout, when non-zero, makes AddSet's set dynamic, its elements expiring
	// after Timeout (nft "flags dynamic,timeout ; timeout Ns").
	Timeout time.Duration
	// Flags are AddSet's flags beyond those Timeout implies.
	Flags SetFlags
	// GCInterval, Size, Policy ("performance" or "memory") and AutoMerge are the
	// other properties of AddSet's set, as nft names them.
	GCInterval time.Duration
	Size       uint32
	Policy     string
	AutoMerge  bool
	// Rule is AddRule's rule.
	Rule *Rule
	// Key and Value are AddElement's element; Value is zero for a set.
	// DeleteElement names its element by Key.
	Key, Value Elem
	// Packets and Bytes are AddCounter's initial values.
	Packets, Bytes uint64
}

// SetFlags are nft's flags of a set.
type SetFlags uint8

const (
	SetConstant SetFlags = 1 << iota
	SetInterval
	SetDynamic
	SetTimeout
)

var setFlagNames = [...]string{"constant", "interval", "dynamic", "timeout"}

// Hook is the attachment of a base chain, as nft names it: type "filter", hook
// "prerouting", priority "-110" (a number, or a name nft accepts), and the
// chain's policy ("accept" or "drop"; empty for nft's default).
type Hook struct {
	Type, Hook, Priority, Policy string
}

var opVerbs = [...]string{
	AddTable: "add table", DeleteTable: "delete table",
	AddChain: "add chain", FlushChain: "flush chain", DeleteChain: "delete chain",
	AddSet: "add set", FlushSet: "flush set", DeleteSet: "delete set",
	AddRule: "add rule", AddElement: "add element", DeleteElement: "delete element",
	AddCounter: "add counter", DeleteCounter: "delete counter", FlushTable: "flush table",
}

// AppendText appends o as one nft command line of the table (with its newline),
// in the format of knftables' Transaction.String (sigs.k8s.io/knftables
// objects.go, writeOperation): the text the nft binary and
// internal/nft/nfttext's CommandParser read.
func (o *Op) AppendText(b []byte, f Family, table string) []byte {
	verb := opVerbs[o.Kind]
	if o.Create {
		verb = "create" + verb[3:]
	}
	if o.IsMap && (o.Kind == AddSet || o.Kind == FlushSet || o.Kind == DeleteSet) {
		verb = verb[:len(verb)-3] + "map"
	}
	b = append(b, verb...)
	b = append(b, ' ')
	b = append(b, f.keyword()...)
	b = append(b, ' ')
	b = append(b, table...)
	switch o.Kind {
	case AddTable:
		if o.Comment != "" {
			b = append(b, " { comment "...)
			b = strconv.AppendQuote(b, o.Comment)
			b = append(b, " ; }"...)
		}
		return append(b, '\n')
	case DeleteTable, FlushTable:
		return append(b, '\n')
	}
	b = append(b, ' ')
	b = append(b, o.Name...)
	switch o.Kind {
	case AddChain:
		if o.Hook != nil || o.Comment != "" {
			b = append(b, " {"...)
			if h := o.Hook; h != nil {
				b = append(b, " type "...)
				b = append(b, h.Type...)
				b = append(b, " hook "...)
				b = append(b, h.Hook...)
				b = append(b, " priority "...)
				b = append(b, h.Priority...)
				b = append(b, " ;"...)
				if h.Policy != "" {
					b = append(b, " policy "...)
					b = append(b, h.Policy...)
					b = append(b, " ;"...)
				}
			}
			b = appendBodyComment(b, o.Comment)
			b = append(b, " }"...)
		}
	case AddSet:
		b = append(b, " { type"...)
		if o.Type.IsTypeof() {
			b = append(b, "of"...)
		}
		b = append(b, ' ')
		b = o.Type.AppendText(b)
		b = append(b, " ;"...)
		b = o.appendSetProperties(b)
		b = appendBodyComment(b, o.Comment)
		b = append(b, " }"...)
	case AddRule:
		b = append(b, ' ')
		b = o.Rule.AppendText(b)
	case AddElement:
		b = append(b, " { "...)
		b = o.Key.AppendText(b)
		if o.Comment != "" {
			b = append(b, " comment "...)
			b = strconv.AppendQuote(b, o.Comment)
		}
		if !o.Value.IsZero() {
			b = append(b, " : "...)
			b = o.Value.AppendText(b)
		}
		b = append(b, " }"...)
	case DeleteElement:
		b = append(b, " { "...)
		b = o.Key.AppendText(b)
		b = append(b, " }"...)
	case AddCounter:
		if o.Packets != 0 || o.Bytes != 0 {
			b = append(b, " { packets "...)
			b = strconv.AppendUint(b, o.Packets, 10)
			b = append(b, " bytes "...)
			b = strconv.AppendUint(b, o.Bytes, 10)
			b = append(b, " ; }"...)
		}
	}
	return append(b, '\n')
}

// appendSetProperties appends AddSet's properties after its type, in knftables'
// order: flags, timeout, gc-interval, size, policy, auto-merge.
func (o *Op) appendSetProperties(b []byte) []byte {
	flags := o.Flags
	if o.Timeout > 0 {
		flags |= SetDynamic | SetTimeout
	}
	if flags != 0 {
		b = append(b, " flags "...)
		first := true
		for i, name := range setFlagNames {
			if flags&(1<<i) == 0 {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			b = append(b, name...)
			first = false
		}
		b = append(b, " ;"...)
	}
	if o.Timeout > 0 {
		b = append(b, " timeout "...)
		b = strconv.AppendInt(b, int64(o.Timeout.Seconds()), 10)
		b = append(b, "s ;"...)
	}
	if o.GCInterval > 0 {
		b = append(b, " gc-interval "...)
		b = strconv.AppendInt(b, int64(o.GCInterval.Seconds()), 10)
		b = append(b, "s ;"...)
	}
	if o.Size > 0 {
		b = append(b, " size "...)
		b = strconv.AppendUint(b, uint64(o.Size), 10)
		b = append(b, " ;"...)
	}
	if o.Policy != "" {
		b = append(b, " policy "...)
		b = append(b, o.Policy...)
		b = append(b, " ;"...)
	}
	if o.AutoMerge {
		b = append(b, " auto-merge ;"...)
	}
	return b
}

// appendBodyComment appends ` comment "c" ;` unless c is empty.
func appendBodyComment(b []byte, c string) []byte {
	if c == "" {
		return b
	}
	b = append(b, " comment "...)
	b = strconv.AppendQuote(b, c)
	return append(b, " ;"...)
}

// AppendScript appends the text of every operation of ops (AppendText), in order:
// the nft script of one transaction.
func AppendScript(b []byte, ops iter.Seq[Op], f Family, table string) []byte {
	for op := range ops {
		b = op.AppendText(b, f, table)
	}
	return b
}
